"""The saved states of bcd's samplers, as ``state_dict`` makes them, gathered
from what a training run saves: one rank's state, the states of every rank (for
an elastic resume on another number of ranks), and states kept inside other
objects (a torchdata ``StatefulDataLoader``'s state holds its sampler's, or each
DataLoader worker's dataset state). Plain dicts in, plain dicts out: no torch,
no NumPy."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

STATE_FORMAT = "bcd.epoch/1"

# Keys that differ between the ranks (and the workers) of one run.
_PER_RANK = ("rank", "position", "taken", "worker")


def is_state(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("format") == STATE_FORMAT


def _found(obj: Any, out: list) -> None:
    """Appends the sampler states inside ``obj`` (dicts, lists and tuples, as
    torchdata nests them) to ``out``."""
    if is_state(obj):
        out.append(obj)
    elif isinstance(obj, dict):
        for value in obj.values():
            _found(value, out)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _found(value, out)


def states_in(obj: Any) -> List[dict]:
    """Every sampler state inside ``obj`` (``obj`` itself if it is one)."""
    out: list = []
    _found(obj, out)
    return out


def rank_state(obj: Any) -> dict:
    """The state of one rank of a run, from ``obj``: the rank's sampler state, or
    what holds it (a StatefulDataLoader's state). An IterableDataset run with
    DataLoader workers saves one state per worker: they are joined into the
    rank's (its position: where the pass began plus what every worker took,
    which a loader handing out batches in order has taken as one prefix)."""
    found = states_in(obj)
    if not found:
        raise ValueError(f"not a state of bcd's samplers (format {STATE_FORMAT!r}) and holds none")
    if len(found) == 1:
        return found[0]
    workers = [state.get("worker") for state in found]
    count = workers[0][1] if workers[0] else None
    if None in workers or count is None or sorted(w[0] for w in workers) != list(range(count)) or any(w[1] != count for w in workers):
        raise ValueError(
            f"the state holds {len(found)} sampler states that are not the {count or '?'} workers of one rank's loader; "
            "pass one rank's state (or a list with one per rank)"
        )
    first = found[0]
    differ = _differences(found, ignore=("taken", "worker"))
    if differ:
        raise ValueError("the workers' states disagree: " + "; ".join(differ))
    joined = {key: value for key, value in first.items() if key not in ("taken", "worker")}
    joined["position"] = first["position"] + sum(int(state.get("taken") or 0) for state in found)
    joined["taken"] = 0
    joined["worker"] = None
    return joined


def _differences(states: List[dict], ignore: Tuple[str, ...]) -> List[str]:
    first = states[0]
    keys = set().union(*(state.keys() for state in states)) - set(ignore)
    out = []
    for key in sorted(keys):
        values = [state.get(key) for state in states]
        if any(value != values[0] for value in values[1:]):
            out.append(f"{key}: {', '.join(repr(v) for v in values)}")
    return out


def run_positions(states: List[dict]) -> Tuple[dict, List[int]]:
    """The states of every rank of one run (any order) as one of them and each
    rank's position, by rank. ValueError unless they are the ranks ``0 .. W-1``
    of one run of one epoch, each once."""
    if not states:
        raise ValueError("no states: pass the state of every rank of the run")
    world = states[0].get("world_size")
    ranks = sorted(state.get("rank") for state in states)
    if ranks != list(range(world or 0)):
        missing = sorted(set(range(world or 0)) - set(ranks))
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        detail = []
        if missing:
            detail.append(f"missing ranks {missing}")
        if twice:
            detail.append(f"ranks {twice} more than once")
        if len(detail) == 0:
            detail.append(f"ranks {ranks}")
        raise ValueError(
            f"a run of {world} ranks needs the state of each rank once ({', '.join(detail)}); "
            "gather every rank's state_dict() at the same step (torch.distributed.all_gather_object)"
        )
    differ = _differences(states, ignore=_PER_RANK)
    if differ:
        raise ValueError("the ranks' states are not of one run of one epoch: " + "; ".join(differ))
    by_rank = sorted(states, key=lambda state: state["rank"])
    return by_rank[0], [int(state["position"]) for state in by_rank]


def resume_point(state: Any, world_size: int, rank: int) -> Tuple[dict, List[List[int]], int, bool]:
    """How a sampler of rank ``rank`` of ``world_size`` resumes from ``state``:
    ``(reference state, resumed_from, position, elastic)``. One state of a run of
    as many ranks resumes that rank as saved (its own position and the runs it
    was itself resumed from); the states of every rank of a run (a list) resume
    the epoch on any number of ranks: the earlier runs plus this one's positions,
    from position 0 of the new layout, unless the ranks are as many and all at one
    position (then each continues its own part from there)."""
    if isinstance(state, (list, tuple)):
        states = [rank_state(item) for item in state]
    else:
        states = [rank_state(state)]
    if len(states) == 1 and states[0].get("world_size") == world_size:
        single = states[0]
        return single, [list(run) for run in single.get("resumed_from") or []], int(single["position"]), False
    if len(states) == 1 and states[0].get("world_size") != 1:
        single = states[0]
        saved = single.get("world_size")
        raise ValueError(
            f"the state was saved with other settings: world_size: saved {saved}, here {world_size} "
            f"(it is rank {single.get('rank')}'s of {saved} ranks; to resume on {world_size} ranks, "
            f"load the states of all {saved} ranks: a list, gathered with "
            "torch.distributed.all_gather_object at the same step)"
        )
    reference, positions = run_positions(states)
    earlier = [list(run) for run in reference.get("resumed_from") or []]
    if len(positions) == world_size and len(set(positions)) == 1:
        return reference, earlier, positions[0], True
    return reference, earlier + [positions], 0, True


def checked_resumed_from(runs: Optional[Any]) -> Optional[List[List[int]]]:
    """``resumed_from`` as a list of lists of ints (None for none)."""
    if runs is None:
        return None
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise TypeError("resumed_from must be a list of runs, each a list of one position per rank")
    out = []
    for run in runs:
        if isinstance(run, (str, bytes)) or not hasattr(run, "__iter__"):
            raise TypeError("resumed_from must be a list of runs, each a list of one position per rank")
        positions = []
        for position in run:
            if isinstance(position, bool) or not hasattr(position, "__index__"):
                raise TypeError(f"resumed_from: a position must be an int, not {type(position).__name__}")
            position = position.__index__()
            if not 0 <= position < 1 << 64:
                raise ValueError(f"resumed_from: position {position} is out of range")
            positions.append(position)
        out.append(positions)
    return out or None
