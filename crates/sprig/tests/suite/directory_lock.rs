//! One open database per directory: while a handle (or any clone of it) is open, another open
//! of the same directory fails with `Error::Locked`, whatever the backend; once every clone is
//! dropped, the directory opens again.

use sprig::{Db, Error, IoBackend, Options};

#[test]
fn a_second_open_is_locked_out_until_the_first_is_closed() {
    for backend in [IoBackend::IoUring, IoBackend::Posix] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            io_backend: backend,
            ..Options::default()
        };
        let first = Db::open(dir.path(), options.clone()).unwrap();
        let mut b = first.begin();
        b.put(first.key_path(b"k"), b"v".to_vec()).unwrap();
        first.commit(b.finish().unwrap()).unwrap();

        for other in [IoBackend::IoUring, IoBackend::Posix] {
            let second = Options {
                io_backend: other,
                ..Options::default()
            };
            match Db::open(dir.path(), second) {
                Err(Error::Locked(path)) => assert_eq!(path, dir.path()),
                Err(e) => panic!("{backend:?} then {other:?}: wrong error {e}"),
                Ok(_) => panic!("{backend:?} then {other:?}: opened twice"),
            }
        }
        // A clone keeps the lock; the last one to go releases it.
        let clone = first.clone();
        drop(first);
        assert!(matches!(
            Db::open(dir.path(), options.clone()),
            Err(Error::Locked(_))
        ));
        drop(clone);
        let again = Db::open(dir.path(), options).unwrap();
        assert_eq!(
            again.view().get(&again.key_path(b"k")).unwrap(),
            Some(b"v".to_vec())
        );
    }
}
