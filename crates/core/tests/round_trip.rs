use sprig_core::*;
#[test]
fn proofs_and_witnesses_round_trip_for_every_hasher() {
    for h in Hasher::ALL {
        let mut m = ReferenceModel::new(h);
        assert_eq!(m.root(), TERMINATOR);
        for i in 0u32..300 {
            m.insert(h.hash_value(&i.to_le_bytes()), i.to_le_bytes().to_vec());
        }
        let root = m.root();
        let keys: Vec<KeyPath> = (0u32..400)
            .map(|i| h.hash_value(&i.to_le_bytes()))
            .collect();
        for k in &keys {
            let p = m.path_proof(k);
            let l = p.verify(h, &root, k).unwrap();
            assert!(l.matches(h, m.get(k)));
            let enc = p.encode(h);
            assert_eq!(PathProof::decode(&enc, h).unwrap(), p);
        }
        let w = m.witness(&keys[250..350]);
        let enc = w.encode(h);
        let w2 = Witness::decode(&enc, h).unwrap();
        let vw = w2.verify(h, &root).unwrap();
        let changes: Vec<(KeyPath, Option<ValueHash>)> = keys[250..350]
            .iter()
            .enumerate()
            .map(|(i, k)| {
                (
                    *k,
                    if i % 3 == 0 {
                        None
                    } else {
                        Some(h.hash_value(&[i as u8]))
                    },
                )
            })
            .collect();
        let new_root = vw.apply(&changes).unwrap();
        for (i, k) in keys[250..350].iter().enumerate() {
            if i % 3 == 0 {
                m.remove(k);
            } else {
                m.insert(*k, vec![i as u8]);
            }
        }
        assert_eq!(new_root, m.root());
    }
}
