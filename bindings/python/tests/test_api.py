"""Every method of the package and its errors."""
import threading

import pytest
import sprig
from conftest import key


def test_put_get_delete_and_roots(db):
    assert db.seq == 0 and len(db) == 0 and db.root == bytes(32)
    with db.batch() as b:
        b.put(key(1), b"one")
        b.put(key(2), b"")
        assert b.get(key(1)) == b"one"
        assert len(b) == 2
    assert b.info.seq == 1 and b.info.root == db.root and len(db.root) == 32
    assert db.get(key(1)) == b"one" and db.get(key(2)) == b"" and db.get(key(3)) is None
    assert db.get_many([key(1), key(3)]) == [b"one", None]
    with db.batch() as b:
        b.delete(key(1))
    assert db.get(key(1)) is None and len(db) == 1 and db.seq == 2
    assert db.hasher == "blake3"
    assert db.key_path(b"x") == sprig.key_path(b"x")


def test_a_batch_that_raises_commits_nothing(db):
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.put(key(1), b"v")
            raise RuntimeError("abort")
    assert db.seq == 0 and db.get(key(1)) is None
    with pytest.raises(sprig.ClosedError):
        b.put(key(1), b"v")


def test_explicit_finish_commit_witness_and_forks(db):
    b = db.begin()
    b.put(key(1), b"a")
    b.get(key(9))
    p = b.finish()
    assert p.seq == 1 and p.base_root == bytes(32) and not p.committed
    with pytest.raises(sprig.ClosedError):
        b.finish()
    keys = sprig.verify_witness(p.witness, p.base_root)
    assert sorted(keys) == sorted([key(1), key(9)])
    with pytest.raises(sprig.ProofError):
        sprig.verify_witness(p.witness, p.root)
    child = p.begin()
    assert child.get(key(1)) == b"a"
    child.put(key(2), b"b")
    c = child.finish()
    sibling = db.begin()
    sibling.put(key(3), b"c")
    s = sibling.finish()
    info = db.commit(c)  # commits p first
    assert info.seq == 2 and p.committed and c.committed
    with pytest.raises(sprig.StaleError):
        db.commit(s)
    with pytest.raises(sprig.StaleError):
        db.commit(c)


def test_pipeline_commits_in_order_while_the_next_batch_is_built(tmp_path):
    path = str(tmp_path / "db")
    roots = []
    with sprig.Db(path, io_backend="posix") as db:
        with db.pipeline(depth=2) as pipe:
            assert pipe.flush() is None and pipe.last_durable is None  # nothing submitted
            for n in range(1, 6):
                b = pipe.begin()  # on the batch submitted before, durable or not
                if n > 1:
                    assert b.get(key(n - 1)) == str(n - 1).encode()
                if n == 3:  # read together through the batch, into its witness
                    assert b.get_many([key(1), key(77)]) == [b"1", None]
                b.put(key(n), str(n).encode())
                p = b.finish()
                assert p.seq == n
                roots.append(p.root)
                if n == 3:
                    witness_of_3 = p.witness
                pipe.submit(p)
            # Block 3's witness proves its three reads and its write against block 2's root.
            assert len(sprig.verify_witness(witness_of_3, roots[1])) == 4
            assert pipe.wait_durable(3).seq >= 3
            last = pipe.flush()
            assert last.seq == 5 and last.root == roots[-1] and pipe.last_durable.seq == 5
            stray = db.begin()  # on version 5, but the tip moves on
            pipe.submit(pipe.begin().finish())  # block 6
            with pytest.raises(sprig.InvalidArgumentError):
                pipe.submit(stray.finish())  # not on the pipeline's tip
            with pytest.raises(sprig.InvalidArgumentError):
                pipe.wait_durable(99)  # never submitted
        # Leaving the block flushed and closed it.
        with pytest.raises(sprig.ClosedError):
            pipe.begin()
        pipe.close()  # closing twice is harmless
        assert db.seq == 6 and db.get(key(5)) == b"5"
        retained = [(seq, r) for seq, r in db.versions() if seq <= 5]
        assert retained and all(r == roots[seq - 1] for seq, r in retained)
    del p  # a pending batch holds its database open, as in Rust
    with sprig.Db(path) as db:  # durable: a reopen sees every submitted batch
        assert db.seq == 6 and len(db) == 5


def test_views_history_and_rollback(db):
    for i in range(3):
        with db.batch() as b:
            b.put(key(0), bytes([i]))
    old = db.view_at(1)
    assert old.get(key(0)) == b"\x00" and old.seq == 1
    view = db.view()
    with db.batch() as b:
        b.put(key(0), b"new")
    assert view.get(key(0)) == b"\x02"  # unchanged by the later commit
    assert [s for s, _ in db.versions()] == [1, 2, 3, 4]
    info = db.rollback_to(2)
    assert info.seq == 5 and db.get(key(0)) == b"\x01"
    with pytest.raises(sprig.InvalidArgumentError):
        db.view_at(999)


def test_iteration_ranges_reverse_and_seek(db):
    keys = sorted(key(i) for i in range(100))
    with db.batch() as b:
        for i in range(100):
            b.put(key(i), i.to_bytes(2, "little"))
    view = db.view()
    assert [k for k, _ in view] == keys
    assert [k for k, _ in view.range(reverse=True)] == keys[::-1]
    assert [k for k, _ in view.range(start=keys[10], end=keys[20])] == keys[10:20]
    c = view.range()
    c.seek(keys[50])
    assert next(c)[0] == keys[50]
    assert len(view) == 100


def test_proofs_verify_and_refuse(db):
    with db.batch() as b:
        b.put(key(1), b"v")
    view = db.view()
    proof = view.prove(key(1))
    assert sprig.verify(proof, view.root, key(1), b"v")
    assert not sprig.verify(proof, view.root, key(1), b"w")
    assert not sprig.verify(proof, view.root, key(1), None)
    absent = view.prove(key(2))
    assert sprig.verify(absent, view.root, key(2), None)
    flipped = bytearray(proof)
    flipped[-1] ^= 1
    assert not sprig.verify(bytes(flipped), view.root, key(1), b"v")
    assert not sprig.verify(b"\x01", view.root, key(1), b"v")  # garbage proves nothing
    w = view.witness([key(1), key(2)])
    assert sorted(sprig.verify_witness(w, view.root)) == sorted([key(1), key(2)])


def test_tables_and_upsert(db):
    db.create_table("balances", resolver="add-u64")
    db.create_table("code")
    assert db.tables() == {"default": None, "balances": "add-u64", "code": None}
    with db.batch() as b:
        b.upsert(key(1), (5).to_bytes(8, "little"), table="balances")
        b.upsert(key(1), (7).to_bytes(8, "little"), table="balances")
        b.put(key(1), b"wasm", table="code")
    assert db.get(key(1), table="balances") == (12).to_bytes(8, "little")
    assert db.get(key(1)) is None
    assert db.view().table_root("balances") != db.view().table_root("code")
    with pytest.raises(sprig.InvalidArgumentError):
        with db.batch() as b:
            b.upsert(key(1), b"x", table="code")
    with pytest.raises(sprig.NotFoundError):
        db.get(key(1), table="nope")
    with pytest.raises(sprig.AlreadyExistsError):
        db.create_table("code")
    db.drop_table("code")
    assert "code" not in db.tables()


def test_snapshots(db):
    with db.batch() as b:
        b.put(key(1), b"before")
    info = db.save_snapshot("block-1")
    assert info["name"] == "block-1" and info["seq"] == 1 and info["damaged"] is None
    with db.batch() as b:
        b.put(key(1), b"after")
    assert db.open_snapshot("block-1").get(key(1)) == b"before"
    assert [s["name"] for s in db.snapshots()] == ["block-1"]
    db.restore_snapshot("block-1")
    assert db.get(key(1)) == b"before"
    db.delete_snapshot("block-1")
    with pytest.raises(sprig.NotFoundError):
        db.open_snapshot("block-1")
    with pytest.raises(sprig.InvalidArgumentError):
        db.save_snapshot("bad/name")


def test_engine_tuning_options(tmp_path):
    path = str(tmp_path / "tuned")
    tuned = dict(segment_bytes=1 << 20, checkpoint_log_bytes=4096, background_checkpoints=True,
                 auto_clean=False, max_space_amplification=1.5, recycled_segments=0,
                 max_overlay_bytes=1 << 30)
    with sprig.Db(path, **tuned) as db:
        for i in range(5):
            with db.batch() as b:
                b.put(key(i), bytes([i]) * 100)
        root = db.root
    # The segment size is the database's own from then on; the rest apply per open.
    with sprig.Db(path) as db:
        assert db.root == root and db.get(key(4)) == bytes([4]) * 100
    for bad in [dict(segment_bytes=12345), dict(max_space_amplification=1.0),
                dict(checkpoint_log_bytes=0)]:
        with pytest.raises(sprig.InvalidArgumentError):
            sprig.Db(str(tmp_path / "refused"), **bad)
    with pytest.raises(OverflowError):
        sprig.Db(str(tmp_path / "refused"), segment_bytes=-1)


def test_in_memory_takes_the_options_that_need_no_disk():
    with sprig.Db.in_memory(metrics_name="mem", max_overlay_bytes=1 << 30, retained_versions=2,
                            cache_bytes=1 << 20) as db:
        with db.batch() as b:
            b.put(key(1), b"one")
        assert db.get(key(1)) == b"one"
    # The overlay bound is the one asked for: a batch larger than it is refused when finished,
    # and nothing of it is committed.
    with sprig.Db.in_memory(max_overlay_bytes=1) as db:
        root = db.root
        with pytest.raises(sprig.SprigError) as e:
            with db.batch() as b:
                b.put(key(2), b"two")
        assert "overlay" in str(e.value)
        assert db.get(key(2)) is None and db.root == root


def test_bad_input_and_misuse_are_clear_errors(tmp_path, db):
    for bad in [b"", b"short", bytes(33)]:
        with pytest.raises(sprig.InvalidArgumentError) as e:
            db.get(bad)
        assert isinstance(e.value, ValueError) and "32-byte" in str(e.value)
    with pytest.raises(TypeError):
        db.get("a string, not bytes")
    with pytest.raises(sprig.InvalidArgumentError):
        sprig.Db.in_memory(hasher="md5")
    with pytest.raises(sprig.InvalidArgumentError):
        sprig.Db(str(tmp_path / "x"), sync="sometimes")
    with pytest.raises(sprig.NotFoundError):
        sprig.Db(str(tmp_path / "missing"), create=False)
    with pytest.raises(sprig.LockedError):
        sprig.Db(str(tmp_path / "db"))  # the fixture holds it open
    db.close()
    assert db.closed
    with pytest.raises(sprig.ClosedError):
        db.get(key(1))
    with pytest.raises(sprig.ClosedError):
        db.batch()
    db.close()  # closing twice is harmless
    assert all(issubclass(c, sprig.SprigError) for c in [
        sprig.IoError, sprig.CorruptionError, sprig.InvalidArgumentError, sprig.NotFoundError,
        sprig.AlreadyExistsError, sprig.LockedError, sprig.ReadOnlyError, sprig.ProofError,
        sprig.StaleError, sprig.ClosedError])


def test_stats_and_reopen(tmp_path):
    path = str(tmp_path / "db")
    with sprig.Db(path, hasher="sha256", cache_bytes=1 << 20) as db:
        with db.batch() as b:
            for i in range(500):
                b.put(key(i), b"x" * 50)
        root = db.root
        s = db.stats()
        assert s["entries"] == 500 and s["commits"] == 1 and s["space_amplification"] >= 1.0
        steps = s["phase_seconds"]
        assert set(steps) == {"locate", "rewrite", "load", "witness",
                              "write", "sync", "log", "housekeeping"}
        assert steps["rewrite"] > 0 and steps["write"] > 0 and steps["load"] <= steps["rewrite"]
    with sprig.Db(path) as db:
        assert db.root == root and db.hasher == "sha256" and len(db) == 500


def test_threads_read_views_concurrently(db):
    with db.batch() as b:
        for i in range(200):
            b.put(key(i), i.to_bytes(4, "little"))
    view = db.view()
    errors = []

    def read(offset):
        try:
            for i in range(offset, 200, 4):
                assert view.get(key(i)) == i.to_bytes(4, "little")
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=read, args=(o,)) for o in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
