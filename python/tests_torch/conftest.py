"""The PyTorch tests run only where torch is installed (`make test-torch`)."""

import pytest

pytest.importorskip("torch")
