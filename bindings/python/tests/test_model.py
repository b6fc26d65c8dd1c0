"""A model test: random batches of puts, deletes and upserts against a Python dict, compared
after every commit (every key and a full iteration), with views of older versions compared to
the dict as it was, and the database reopened from disk at the end."""
import random

import sprig
from conftest import key


def test_random_batches_match_a_dict(tmp_path):
    rng = random.Random(20261124)
    path = str(tmp_path / "db")
    db = sprig.Db(path, io_backend="posix", retained_versions=8)
    db.create_table("counts", resolver="add-u64")
    model, counts, history = {}, {}, {}
    keys = [key(i) for i in range(300)]
    for _ in range(40):
        with db.batch() as b:
            for _ in range(rng.randrange(1, 60)):
                k = rng.choice(keys)
                op = rng.random()
                if op < 0.55:
                    v = rng.randbytes(rng.choice([0, 1, 8, 40, 300, 3000]))
                    b.put(k, v)
                    model[k] = v
                elif op < 0.8:
                    b.delete(k)
                    model.pop(k, None)
                else:
                    n = rng.randrange(1000)
                    b.upsert(k, n.to_bytes(8, "little"), table="counts")
                    counts[k] = counts.get(k, 0) + n
        history[db.seq] = dict(model)
        for k in keys:
            assert db.get(k) == model.get(k)
        assert dict(db.view()) == model
        assert {k: int.from_bytes(v, "little") for k, v in db.view().range(table="counts")} == counts
        assert len(db) == len(model)  # the default table
    for seq, _ in db.versions():
        assert dict(db.view_at(seq)) == history[seq]
    root = db.root
    db.close()
    with sprig.Db(path) as again:
        assert again.root == root
        assert dict(again.view()) == model
