//! The C ABI as a C program uses it: `tests/c/sprig_test.c` compiled with the system C
//! compiler against `include/sprig.h` and the static library, run, then run again under
//! valgrind (memory errors and definite leaks fail the test). A missing compiler or valgrind
//! fails loudly; `SPRIG_FFI_SKIP_VALGRIND=1` skips only the valgrind run, and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory cargo put this test's build in (target/<profile>).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/c_api-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary sits in target/<profile>/deps")
        .to_path_buf()
}

/// The static library cargo built beside this test (all crate types of the lib are built
/// together, into `deps`; the copy one level up is the last `cargo build`'s, maybe older).
fn static_lib() -> PathBuf {
    let dir = profile_dir();
    for candidate in [dir.join("deps/libsprig_ffi.a"), dir.join("libsprig_ffi.a")] {
        if candidate.exists() {
            return candidate;
        }
    }
    panic!(
        "libsprig_ffi.a not found under {}: build with `cargo test -p sprig-ffi`",
        dir.display()
    );
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{what}: could not start {:?} ({e}); install it",
            cmd.get_program()
        )
    });
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_c_test_program_passes_natively_and_under_valgrind() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let exe = scratch.path().join("sprig_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    run(
        Command::new(&cc)
            .arg("-std=c99")
            .arg("-Wall")
            .arg("-Wextra")
            .arg("-Werror")
            .arg("-g")
            .arg("-I")
            .arg(manifest.join("include"))
            .arg(manifest.join("tests/c/sprig_test.c"))
            .arg(static_lib())
            .args(["-lpthread", "-ldl", "-lm"])
            .arg("-o")
            .arg(&exe),
        "compiling tests/c/sprig_test.c",
    );

    let db = scratch.path().join("native");
    let out = run(Command::new(&exe).arg(&db), "the C test program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("alice = 100 at version 1"), "{stdout}");
    assert!(stdout.contains("checks passed"), "{stdout}");

    if std::env::var_os("SPRIG_FFI_SKIP_VALGRIND").is_some() {
        eprintln!("SPRIG_FFI_SKIP_VALGRIND is set: the valgrind run is skipped");
        return;
    }
    let db = scratch.path().join("valgrind");
    run(
        Command::new("valgrind")
            .args([
                "--quiet",
                "--error-exitcode=99",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
                "--show-leak-kinds=definite",
            ])
            .arg(&exe)
            .arg(&db),
        "the C test program under valgrind (install valgrind, or set SPRIG_FFI_SKIP_VALGRIND=1)",
    );
}
