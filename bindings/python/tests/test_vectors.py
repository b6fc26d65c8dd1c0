"""State roots of `sprig.Db` equal the Rust reference model's (tests/vectors.json, kept in
step with the model by crates/core/tests/python_vectors.rs)."""
import json
import pathlib

import pytest
import sprig

CASES = json.loads((pathlib.Path(__file__).parent / "vectors.json").read_text())["cases"]


def value(i: int) -> bytes:
    if i == 5:
        return bytes(j % 251 for j in range(5000))
    if i % 10 == 3:
        return b""
    return b"value-%d" % i


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['hasher']}-{c['n']}")
def test_roots_match_the_reference_model(case):
    with sprig.Db.in_memory(hasher=case["hasher"]) as db:
        with db.batch() as b:
            for i in range(case["n"]):
                b.put(sprig.key_path(i.to_bytes(4, "little"), hasher=case["hasher"]), value(i))
        assert db.root.hex() == case["root"]


def test_the_vectors_cover_every_hasher():
    assert {c["hasher"] for c in CASES} == {"blake3", "sha256", "keccak256"}
    assert any(c["n"] == 1000 for c in CASES)
