//! The manifest: raw bytes either fail to decode with a typed error or give a manifest that
//! stores and loads back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::MemoryStorage;
use sprig::log::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::decode(data) {
        let storage = MemoryStorage::new();
        assert!(
            m.store(&storage).is_ok(),
            "a decoded manifest cannot be stored"
        );
        let back = Manifest::load(&storage);
        assert_eq!(
            back.ok().flatten(),
            Some(m),
            "a manifest does not round-trip"
        );
    }
});
