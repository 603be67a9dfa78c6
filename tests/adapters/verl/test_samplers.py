"""PairSampler: both views of a question in the same batch, deterministic, resumable, clear errors."""

import random

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

from devenus.adapters.verl.samplers import PairingError, PairSampler, create_train_sampler  # noqa: E402


class Rows:
    """A map-style dataset of extra_info dicts (what the sampler reads)."""

    def __init__(self, infos):
        self.infos = infos

    def __len__(self):
        return len(self.infos)

    def __getitem__(self, i):
        return {"extra_info": self.infos[i], "i": i}


def paired(n_pairs, shuffle_rows=True, seed=0):
    infos = []
    for p in range(n_pairs):
        infos.append({"index": f"q{p}", "pair_key": f"q{p}", "view": "original"})
        infos.append({"index": f"q{p}#r", "pair_key": f"q{p}", "view": "paraphrase"})
    if shuffle_rows:
        random.Random(seed).shuffle(infos)  # partners need not be adjacent in the file
    return Rows(infos)


def cfg(batch=4, seed=7, shuffle=True):
    return OmegaConf.create({"train_batch_size": batch, "seed": seed, "shuffle": shuffle})


def loader(ds, sampler, batch=4):
    return StatefulDataLoader(ds, batch_size=batch, sampler=sampler, drop_last=True, num_workers=0,
                              collate_fn=lambda rows: [r["i"] for r in rows])


def test_pairs_are_co_batched_and_every_row_served_once_per_epoch():
    ds = paired(10)
    s = PairSampler(ds, cfg())
    dl = loader(ds, s)
    seen = []
    for b in dl:
        keys = [ds.infos[i]["pair_key"] for i in b]
        assert keys[0::2] == keys[1::2]  # adjacent partners
        assert [ds.infos[i]["view"] for i in b[0::2]] == ["original"] * 2  # original first
        seen += b
    assert len(seen) == 20 - 20 % 4 and len(set(seen)) == len(seen)
    assert len(s) == 20


def test_deterministic_given_seed_and_different_across_epochs_and_seeds():
    ds = paired(12)
    a, b = PairSampler(ds, cfg(seed=1)), PairSampler(ds, cfg(seed=1))
    e0, e1 = list(a), list(a)
    assert e0 == list(b) and e1 == list(b)
    assert e0 != e1  # a new shuffle each epoch
    assert list(PairSampler(ds, cfg(seed=2))) != e0
    assert sorted(e0) == list(range(24))
    ordered = list(PairSampler(ds, cfg(shuffle=False)))
    first_seen = list(dict.fromkeys(info["pair_key"] for info in ds.infos))
    assert [ds.infos[i]["pair_key"] for i in ordered[::2]] == first_seen  # no shuffle: file order of pairs
    assert ordered == list(PairSampler(ds, cfg(shuffle=False)))


def test_resume_mid_epoch_and_next_epoch_match_an_uninterrupted_run():
    ds = paired(10)
    full = loader(ds, PairSampler(ds, cfg()))
    want = [b for b in full] + [b for b in full]  # two epochs

    first = loader(ds, PairSampler(ds, cfg()))
    it = iter(first)
    got = [next(it), next(it)]
    state = first.state_dict()
    resumed = loader(ds, PairSampler(ds, cfg()))
    resumed.load_state_dict(state)
    got += [b for b in resumed]  # rest of epoch 0
    got += [b for b in resumed]  # epoch 1
    assert got == want


def test_errors_are_clear():
    with pytest.raises(PairingError, match="even batch size.*train_batch_size=5"):
        PairSampler(paired(4), cfg(batch=5))
    lonely = Rows(paired(3).infos + [{"index": "solo", "pair_key": "solo"}])
    with pytest.raises(PairingError, match="partner row is missing: 'solo'"):
        PairSampler(lonely, cfg())
    crowd = Rows(paired(2, shuffle_rows=False).infos + [{"index": "q0#x", "pair_key": "q0"}])
    with pytest.raises(PairingError, match="more than two rows: 'q0'"):
        PairSampler(crowd, cfg())
    with pytest.raises(PairingError, match="without extra_info.pair_key: 'k'"):
        PairSampler(Rows([{"index": "k"}]), cfg())


def test_seam_picks_the_sampler():
    ds = paired(2)
    assert create_train_sampler(cfg(), ds) is None  # nothing asked: verl's own sampler stays
    assert isinstance(create_train_sampler(cfg(), ds, frozenset({"paraphrases"})), PairSampler)
    c = cfg()
    c.sampler = {"class_path": "devenus.adapters.verl.samplers", "class_name": "PairSampler"}
    assert isinstance(create_train_sampler(c, ds), PairSampler)


def test_reads_pair_keys_from_verls_dataset(base_testbed, tmp_path):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from devenus.records import read_records, write_records
    from devenus.records.pairs import pair_views

    orig = read_records(base_testbed.split("train"))[:6]
    rew = read_records(base_testbed.split("train_paraphrase"))[:6]
    path = tmp_path / "paired.parquet"
    write_records(pair_views(orig, rew), path)
    tb_tok = base_testbed.load_model()[1]
    ds = RLHFDataset(str(path), tb_tok, OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 64,
                                                           "filter_overlong_prompts": False}))
    s = PairSampler(ds, cfg(batch=4))
    order = list(s)
    keys = [ds.dataframe[i]["extra_info"]["pair_key"] for i in order]
    assert keys[0::2] == keys[1::2] and len(set(keys)) == 6
