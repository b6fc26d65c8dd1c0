//! Pages: a valid page with input-directed mutations, and raw bytes, either fail to decode with
//! a `PageError` or decode to a page whose every entry reads back, proves, and re-decodes to
//! the same entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::page::{Page, ValueRef};
use sprig::prefix::Prefix;
use sprig_fuzz::{hasher, model, mutate, Choices};

fn exercise(page: &Page, h: sprig::Hasher) {
    let items = page.items();
    for (key, value) in &items {
        assert_eq!(
            page.get(key).as_ref(),
            Some(value),
            "an entry does not read back"
        );
        let _ = page.path_proof_below(h, key);
    }
    let _ = page.node(h);
    let _ = page.computed_buckets(h);
    let again = Page::decode(&page.block().0).map(|p| p.items().len());
    assert_eq!(again, Ok(items.len()), "a decoded page does not re-decode");
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let m = model(&mut c, h);
    let entries: Vec<_> = m.iter().map(|(k, v)| (*k, ValueRef::Inline(v))).collect();
    let built = Page::build(h, Prefix::root(), u64::from(c.byte()), &entries);
    let Ok(page) = built else {
        panic!("a valid page cannot be built: {built:?}");
    };
    let mut bytes = page.block().0.to_vec();
    mutate(&mut c, &mut bytes);
    for bytes in [bytes.as_slice(), c.rest()] {
        if let Ok(page) = Page::decode(bytes) {
            exercise(&page, h);
        }
    }
});
