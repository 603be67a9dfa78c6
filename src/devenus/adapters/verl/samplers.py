"""Training samplers for verl's dataloader, and the seam that installs them.

verl 0.9.1's legacy ``create_rl_sampler`` no longer reads ``data.sampler.class_path`` (older releases
did, for curriculum samplers; 0.9.x moved custom samplers to the V1 trainer's replay buffer). DE-Venus
restores that seam in :class:`~devenus.adapters.verl.trainer.DeVenusTrainer`: with
``+data.sampler.class_path=<module or file>`` and ``+data.sampler.class_name=<Class>`` the class is
built as ``cls(data_source=dataset, data_config=config.data)`` (the old protocol); a method whose
``data_needs`` contain ``paraphrases`` gets :class:`PairSampler` by default.

:class:`PairSampler` shuffles *pairs* of rows sharing ``extra_info.pair_key`` and yields each pair's
two rows back to back, so with an even batch size both views of a question always land in the same
step. It is deterministic given ``data.seed`` and the epoch, and stateful (``state_dict`` /
``load_state_dict``) so torchdata's ``StatefulDataLoader`` resumes mid-epoch exactly.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch
from torch.utils.data import Sampler


class PairingError(ValueError):
    """The dataset or batch size cannot be served as co-batched pairs."""


def _named(keys: Sequence[str], limit: int = 10) -> str:
    keys = sorted(map(str, keys))
    return ", ".join(repr(k) for k in keys[:limit]) + (f" ... ({len(keys) - limit} more)" if len(keys) > limit else "")


def dataset_extra_info(dataset) -> list[dict]:
    """``extra_info`` of every row, read from the column when the dataset exposes one (verl's RLHFDataset)."""
    frame = getattr(dataset, "dataframe", None)
    if frame is not None and "extra_info" in getattr(frame, "column_names", getattr(frame, "columns", ())):
        return [dict(e or {}) for e in frame["extra_info"]]
    return [dict(dataset[i].get("extra_info") or {}) for i in range(len(dataset))]


def pair_rows(infos: Sequence[dict]) -> list[tuple[int, int]]:
    """Row positions of each pair, in order of first appearance; the original view (if marked) first."""
    groups: dict[str, list[int]] = {}
    no_key = []
    for i, info in enumerate(infos):
        pk = info.get("pair_key")
        if pk in (None, ""):
            no_key.append(str(info.get("index", i)))
            continue
        groups.setdefault(str(pk), []).append(i)
    errors = []
    if no_key:
        errors.append(f"{len(no_key)} row(s) without extra_info.pair_key: {_named(no_key)}")
    alone = [k for k, rows in groups.items() if len(rows) == 1]
    crowded = [k for k, rows in groups.items() if len(rows) > 2]
    if alone:
        errors.append(f"{len(alone)} pair_key(s) whose partner row is missing: {_named(alone)}")
    if crowded:
        errors.append(f"{len(crowded)} pair_key(s) held by more than two rows: {_named(crowded)}")
    if errors:
        raise PairingError("PairSampler needs every row paired with exactly one other row "
                           "(build the data with `devenus data pair-views`; did data.filter_overlong_prompts or "
                           "data.train_max_samples drop a partner?):\n  " + "\n  ".join(errors))
    out = []
    for rows in groups.values():
        a, b = rows
        if infos[b].get("view") == "original" and infos[a].get("view") != "original":
            a, b = b, a
        out.append((a, b))
    return out


class PairSampler(Sampler[int]):
    """Yields the two rows of each pair adjacently; pairs are shuffled (``data.shuffle``) per epoch.

    Protocol: ``PairSampler(data_source=dataset, data_config=config.data)``. The dataloader's batch size
    (``data.gen_batch_size`` or ``data.train_batch_size``) must be even, otherwise a pair would straddle
    two steps.
    """

    def __init__(self, data_source, data_config: Any = None, *, batch_size: int | None = None,
                 shuffle: bool | None = None, seed: int | None = None):
        cfg = data_config if data_config is not None else {}
        get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: d)
        if batch_size is None:
            batch_size = get("gen_batch_size", None) or get("train_batch_size", None)
        if batch_size is not None and int(batch_size) % 2:
            raise PairingError(f"PairSampler needs an even batch size so both views of a question share a step; "
                               f"got data.train_batch_size={batch_size} (use an even number of rows, i.e. pairs x 2)")
        self.data_source = data_source
        self.shuffle = bool(get("shuffle", True) if shuffle is None else shuffle)
        s = get("seed", None) if seed is None else seed
        self.seed = 0 if s is None else int(s)
        self.pairs = pair_rows(dataset_extra_info(data_source))
        self.epoch = 0  # the epoch the next (or current) iteration serves
        self.yielded = 0  # rows yielded in the current epoch
        self._resume_at: int | None = None

    def __len__(self) -> int:
        return 2 * len(self.pairs)

    def order(self, epoch: int) -> list[int]:
        """The row order of one epoch: a function of (seed, epoch) only."""
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed * 1_000_003 + epoch)
            perm = torch.randperm(len(self.pairs), generator=g).tolist()
        else:
            perm = range(len(self.pairs))
        return [r for p in perm for r in self.pairs[p]]

    def __iter__(self) -> Iterator[int]:
        order = self.order(self.epoch)
        start = self._resume_at or 0
        self._resume_at = None
        self._current = self.epoch
        self.epoch += 1  # a dataloader with drop_last never exhausts the iterator: advance now
        self.yielded = start
        return self._rows(order, start)

    def _rows(self, order: list[int], start: int) -> Iterator[int]:
        for idx in order[start:]:
            self.yielded += 1
            yield idx

    def state_dict(self) -> dict[str, int]:
        current = getattr(self, "_current", None)
        if current is None:  # not iterated yet
            return {"epoch": self.epoch, "yielded": 0}
        return {"epoch": current, "yielded": self.yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self._resume_at = int(state["yielded"])
        self._current = None


def load_sampler_class(class_path: str, class_name: str):
    """``class_path`` is a module (``pkg.mod``) or a ``.py`` file; ``class_name`` a class in it."""
    import importlib

    if class_path.endswith(".py"):
        from verl.utils.import_utils import load_extern_type

        return load_extern_type(class_path, class_name)
    return getattr(importlib.import_module(class_path), class_name)


def create_train_sampler(data_config, dataset, needs: frozenset[str] = frozenset()):
    """The sampler DE-Venus installs, or None to keep verl's (``data.sampler`` unset, no pairing need)."""
    spec = data_config.get("sampler", None) if hasattr(data_config, "get") else None
    class_path = spec.get("class_path", None) if spec is not None else None
    if class_path:
        cls = load_sampler_class(class_path, spec.get("class_name", None) or "")
        return cls(data_source=dataset, data_config=data_config)
    if "paraphrases" in needs:
        return PairSampler(data_source=dataset, data_config=data_config)
    return None
