//! A FIFO in place of a dataset file makes every reading command fail at once
//! with a message naming the file, instead of blocking forever (issue 14, item 9).
#![cfg(unix)]

mod common;

use std::process::Command;

use bcd::{Compression, CreateOptions, Dataset};

use common::{assert_clean_failure, finish, s, spawn};

#[test]
fn info_verify_and_ls_refuse_a_fifo_in_place_of_a_shard() {
    for name in ["000000.bin", "000000.idx", "manifest.json"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let options = CreateOptions {
            keyed: true,
            compression: Compression::None,
            ..Default::default()
        };
        let mut dataset = Dataset::create(&path, options).unwrap();
        dataset.extend([(b"k", b"v")]).unwrap();
        drop(dataset);
        let fifo = path.join(name);
        std::fs::remove_file(&fifo).unwrap();
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());

        for command in ["info", "verify", "ls"] {
            let what = format!("{command} with a FIFO as {name}");
            let run = finish(spawn(&[command, s(&path)], false, None), &what);
            assert_clean_failure(&run, &what);
            assert!(
                run.stderr.contains(s(&fifo)) && run.stderr.contains("not a regular file"),
                "{what}: {}",
                run.stderr
            );
        }
    }
}
