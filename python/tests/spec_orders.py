"""The epoch orders of ``bcd.partition``, implemented again in plain Python from
their specification (the documentation of ``sampling/src``: rng.rs, shuffle.rs,
blocks.rs, weighted.rs, interleave.rs, plan.rs), for small inputs. Equal outputs
show the specification is complete: another implementation, in any language,
gives the same orders."""

from __future__ import annotations

import heapq
import math
import struct

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
BUCKET_SHIFT = 18
CHUNK = 1 << 16

RECORD_BUCKETS, RECORD_BUCKET_SHUFFLE, BLOCK_BUCKETS, BLOCK_BUCKET_SHUFFLE, WITHIN_BLOCK, WEIGHT_KEYS, ALLOCATION_REMAINDER = range(1, 8)


def _finalize(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def mix64(z: int) -> int:
    return _finalize((z + GOLDEN) & MASK)


def stream_key(seed: int, epoch: int, purpose: int, index: int) -> int:
    return mix64(mix64(mix64(mix64(seed) ^ epoch) ^ purpose) ^ index)


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK


class Xoshiro:
    def __init__(self, seed: int, epoch: int, purpose: int, index: int):
        state = stream_key(seed, epoch, purpose, index)
        self.s = []
        for _ in range(4):
            state = (state + GOLDEN) & MASK
            self.s.append(_finalize(state))

    def next(self) -> int:
        s = self.s
        result = (_rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, bound: int) -> int:
        product = self.next() * bound
        low = product & MASK
        if low < bound:
            threshold = (-bound % (1 << 64)) % bound
            while low < threshold:
                product = self.next() * bound
                low = product & MASK
        return product >> 64

    def open01(self) -> float:
        return ((self.next() >> 11) + 0.5) * (1.0 / (1 << 53))

    def shuffle(self, items: list) -> None:
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def ln(x: float) -> float:
    """The documented logarithm (IEEE basic operations only)."""
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    exponent = ((bits >> 52) & 0x7FF) - 1023
    m = struct.unpack("<d", struct.pack("<Q", (bits & ((1 << 52) - 1)) | (1023 << 52)))[0]
    if m >= math.sqrt(2.0):
        m *= 0.5
        exponent += 1
    z = (m - 1.0) / (m + 1.0)
    z2 = z * z
    total = 1.0 / 23.0
    k = 21.0
    while k >= 1.0:
        total = total * z2 + 1.0 / k
        k -= 2.0
    return 2.0 * z * total + exponent * math.log(2.0)


def shuffle(n: int, seed: int, epoch: int, buckets: int = RECORD_BUCKETS, within: int = RECORD_BUCKET_SHUFFLE) -> list:
    k = max(1, -(-n // (1 << BUCKET_SHIFT)))
    lists = [[] for _ in range(k)]
    for chunk in range(-(-n // CHUNK)):
        rng = Xoshiro(seed, epoch, buckets, chunk)
        for i in range(chunk * CHUNK, min((chunk + 1) * CHUNK, n)):
            lists[0 if k == 1 else rng.below(k)].append(i)
    out = []
    for j, items in enumerate(lists):
        Xoshiro(seed, epoch, within, j).shuffle(items)
        out.extend(items)
    return out


def block_shuffle(n: int, size: int, seed: int, epoch: int) -> list:
    out = []
    for block in shuffle(-(-n // size), seed, epoch, BLOCK_BUCKETS, BLOCK_BUCKET_SHUFFLE):
        records = list(range(block * size, min((block + 1) * size, n)))
        Xoshiro(seed, epoch, WITHIN_BLOCK, block).shuffle(records)
        out.extend(records)
    return out


def weighted(n: int, weights: list, count: int, seed: int, epoch: int) -> list:
    keyed = []
    for chunk in range(-(-n // CHUNK)):
        rng = Xoshiro(seed, epoch, WEIGHT_KEYS, chunk)
        for i in range(chunk * CHUNK, min((chunk + 1) * CHUNK, n)):
            u = rng.open01()
            if weights[i] > 0:
                keyed.append((ln(u) / weights[i], i))
    keyed.sort(key=lambda kv: (-kv[0], kv[1]))
    assert count <= len(keyed)
    return [i for _, i in keyed[:count]]


def interleave(counts: list, shares: list, total: int) -> list:
    """Earliest deadline first over the windows [r_j, d_j]."""
    placed = [0] * len(counts)
    pending = [(1, c) for c, k in enumerate(counts) if k > 0]
    heapq.heapify(pending)
    ready: list = []
    out = []
    for slot in range(1, sum(counts) + 1):
        while pending and pending[0][0] <= slot:
            _, c = heapq.heappop(pending)
            j = placed[c] + 1
            heapq.heappush(ready, (-(-j * total // shares[c]), c))
        _, c = heapq.heappop(ready)
        placed[c] += 1
        if placed[c] < counts[c]:
            heapq.heappush(pending, ((placed[c] * total) // shares[c] + 1, c))
        out.append(c)
    return out


def partition(n, *, seed, epoch, rank, world_size, shuffle_=True, drop_last=False, block_size=None,
              categories=None, weights=None, num_samples=None):
    if weights is not None:
        if weights == "inverse_frequency":
            sizes = {}
            for c in categories:
                sizes[c] = sizes.get(c, 0) + 1
            weights = [1.0 / sizes[c] for c in categories]
        count = num_samples if num_samples is not None else sum(1 for w in weights if w > 0)
        base = weighted(n, weights, count, seed, epoch)
    else:
        if block_size is not None:
            base = block_shuffle(n, block_size, seed, epoch)
        elif shuffle_:
            base = shuffle(n, seed, epoch)
        else:
            base = list(range(n))
        if num_samples is not None:
            base = base[:num_samples]
    length = len(base)
    m = length // world_size if drop_last else -(-length // world_size)
    total = m * world_size
    epoch_list = [base[p % length] for p in range(total)]
    if categories is None:
        return epoch_list[rank * m:(rank + 1) * m]
    classes = sorted(set(categories))
    number = {c: i for i, c in enumerate(classes)}
    shares = [sum(1 for e in epoch_list if number[categories[e]] == c) for c in range(len(classes))]
    # Groups in increasing (s*_c, c), s*_c = m - floor(floor(N_c / W) T / N_c): the
    # order that gives every rank a rounding its interleave can schedule.
    tail = [m - (n // world_size) * total // n if n else 0 for n in shares]
    grouped = sorted(range(total), key=lambda p: (tail[number[categories[epoch_list[p]]]],
                                                  number[categories[epoch_list[p]]], p))
    mine = [epoch_list[p] for i, p in enumerate(grouped) if i % world_size == rank]
    by_class = [[e for e in mine if number[categories[e]] == c] for c in range(len(classes))]
    sequence = interleave([len(b) for b in by_class], shares, total)
    taken = [0] * len(classes)
    out = []
    for c in sequence:
        out.append(by_class[c][taken[c]])
        taken[c] += 1
    return out


MIX_SOURCE = 8


def _dealing_counts(shares: list, world_size: int, total: int, per_rank: int):
    """For each class, the grouped-list positions' dealing: the class groups in
    increasing (s*_c, c) and entry i to rank i mod W. Returns, per class, the
    list of ranks its entries go to, in order."""
    tail = [per_rank - (n // world_size) * total // n if n else 0 for n in shares]
    order = sorted(range(len(shares)), key=lambda c: (tail[c], c))
    start, at = {}, 0
    for c in order:
        start[c] = at
        at += shares[c]
    return [[(start[c] + i) % world_size for i in range(shares[c])] for c in range(len(shares))]


def mixture(lengths, weights, *, seed, epoch, rank, world_size, num_samples=None, shuffle_=True,
            block_size=None, drop_last=False):
    """The documented mixture (sampling/src/mixture.rs), every sample an index of
    the sources' common index space."""
    samples = sum(lengths) if num_samples is None else num_samples
    m = samples // world_size if drop_last else -(-samples // world_size)
    total = m * world_size
    s = 0.0
    for w in weights:
        s += w
    running, cumulative = 0.0, []
    for k, w in enumerate(weights):
        running += w
        cumulative.append(total if k == len(weights) - 1 else min(total, math.floor(total * (running / s))))
    shares = [cumulative[k] - (cumulative[k - 1] if k else 0) for k in range(len(weights))]
    offsets = [sum(lengths[:k]) for k in range(len(lengths))]
    draws = []
    for k, n in enumerate(lengths):
        key = stream_key(seed, epoch, MIX_SOURCE, k)
        out, p = [], 0
        while len(out) < shares[k]:
            if block_size is not None:
                one = block_shuffle(n, block_size, key, p)
            elif shuffle_:
                one = shuffle(n, key, p)
            else:
                one = list(range(n))
            out.extend(i + offsets[k] for i in one)
            p += 1
        draws.append(out[:shares[k]])
    ranks = _dealing_counts(shares, world_size, total, m)
    counts = [ranks[c].count(rank) for c in range(len(shares))]
    before = [sum(1 for r in ranks[c] if r < rank) for c in range(len(shares))]
    taken = list(before)
    out = []
    for c in interleave(counts, shares, total):
        out.append(draws[c][taken[c]])
        taken[c] += 1
    return out


def resumed(parts_of, runs, world_size, rank, drop_last=False, class_of=None):
    """The current run's part of rank ``rank`` after the runs ``runs`` (each a
    list of one position per rank): ``parts_of(world)`` gives the first run's
    parts on ``world`` ranks; ``class_of`` the class of an entry when the rest is
    dealt by class (sampling/src/elastic.rs)."""
    parts = parts_of(len(runs[0]))
    for i, positions in enumerate(runs):
        world = len(runs[i + 1]) if i + 1 < len(runs) else world_size
        if len(positions) == world and len(set(positions)) == 1:
            parts = [part[positions[0]:] for part in parts]
            continue
        rest = [e for part, c in zip(parts, positions) for e in part[c:]]
        m = len(rest) // world if drop_last else -(-len(rest) // world)
        total = m * world
        epoch_list = [rest[p % len(rest)] for p in range(total)]
        if class_of is None:
            parts = [epoch_list[r * m:(r + 1) * m] for r in range(world)]
            continue
        classes = sorted({class_of(e) for e in rest})
        number = {c: j for j, c in enumerate(classes)}
        shares = [sum(1 for e in epoch_list if number[class_of(e)] == j) for j in range(len(classes))]
        tail = [m - (n // world) * total // n if n else 0 for n in shares]
        grouped = sorted(range(total), key=lambda p: (tail[number[class_of(epoch_list[p])]],
                                                      number[class_of(epoch_list[p])], p))
        new_parts = []
        for r in range(world):
            mine = [epoch_list[p] for j, p in enumerate(grouped) if j % world == r]
            by_class = [[e for e in mine if number[class_of(e)] == j] for j in range(len(classes))]
            sequence = interleave([len(b) for b in by_class], shares, total)
            taken = [0] * len(classes)
            part = []
            for j in sequence:
                part.append(by_class[j][taken[j]])
                taken[j] += 1
            new_parts.append(part)
        parts = new_parts
    return parts[rank]
