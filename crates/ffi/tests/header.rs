//! The checked-in C header is what cbindgen makes of the sources now: a change to the ABI
//! that was not carried into `include/sprig.h` fails here. `make ffi-header` (or
//! `SPRIG_BLESS=1 cargo test -p sprig-ffi --test header`) rewrites it.

#[test]
fn header_is_up_to_date() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let path = format!("{dir}/include/sprig.h");
    if std::env::var_os("SPRIG_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("writing the header");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "crates/ffi/include/sprig.h is stale: run `make ffi-header`"
    );
}
