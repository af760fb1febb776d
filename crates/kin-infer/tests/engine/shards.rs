//! Sharded corpus runs (`kin_infer::shards`, the Python package's Ray runner): shards written
//! in any order and merged give the single-process records; a shard cut short by a killed
//! worker continues where its durable part ends; a resume with another model, settings or
//! input is refused; two writers of one shard cannot both run.

use crate::common::repo_root;
use kin_infer::corpus::{push_record, DurableOutput, RunIdentity};
use kin_infer::shards::{self, merge, pending_shards, prepare_run, shard_path, write_shard};
use kin_infer::{Embedder, EmbedderOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

fn embedder() -> Embedder {
    let dir = repo_root().join("tests/server_fixtures/embed_tiny");
    Embedder::load(&dir, &EmbedderOptions::default()).expect("embed_tiny loads")
}

/// 23 JSON Lines items with ids (and blank lines, which the input format skips).
fn write_input(dir: &Path) -> PathBuf {
    let p = dir.join("in.jsonl");
    let mut s = String::new();
    for i in 0..23 {
        s.push_str(&format!(
            "{{\"id\":\"e{i}\",\"text\":\"fn f{i}() {{ {} }}\"}}\n",
            i * 7
        ));
        if i % 5 == 0 {
            s.push('\n');
        }
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// The records one process writes for the JSON Lines `text` (blank lines skipped), numbered
/// from `first`: the reference bytes.
fn records(e: &Embedder, text: &str, first: u64) -> Vec<u8> {
    let items: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let texts: Vec<&str> = items.iter().map(|v| v["text"].as_str().unwrap()).collect();
    let vecs = e.embed_texts(&texts).unwrap();
    let mut out = String::new();
    for (i, (v, item)) in vecs.iter().zip(&items).enumerate() {
        push_record(&mut out, first + i as u64, Some(&item["id"]), v).unwrap();
    }
    out.into_bytes()
}

fn single_process(e: &Embedder, input: &Path) -> Vec<u8> {
    records(e, &std::fs::read_to_string(input).unwrap(), 0)
}

/// A run over the test input in shards of `shard_items` items, prepared in a fresh
/// temporary directory (`tmp`, which holds the input and the run directory `run`).
struct Started {
    e: Embedder,
    tmp: tempfile::TempDir,
    input: PathBuf,
    run: PathBuf,
    id: RunIdentity,
}

fn start(shard_items: u64) -> Started {
    let e = embedder();
    let tmp = tempfile::tempdir().unwrap();
    let input = write_input(tmp.path());
    let run = tmp.path().join("run");
    let id = RunIdentity::of(&e, "jsonl").unwrap();
    let index = shards::index_input(&input, true, shard_items).unwrap();
    prepare_run(&run, id.clone(), index).unwrap();
    Started {
        e,
        tmp,
        input,
        run,
        id,
    }
}

#[test]
fn shards_in_any_order_merge_to_the_single_process_bytes() {
    let Started {
        e,
        tmp,
        input,
        run,
        id,
    } = start(7);
    let r = shards::load_run(&run).unwrap();
    assert_eq!(r.index.items, 23);
    assert_eq!(r.index.shards.len(), 4);
    assert_eq!(pending_shards(&run, &r).unwrap(), vec![0, 1, 2, 3]);
    // Out of order, with different forward batch sizes.
    for (k, bs) in [(3, 1), (1, 5), (0, 32), (2, 3)] {
        let o = write_shard(&e, &id, &run, k, bs, WAIT).unwrap();
        assert_eq!(o.resumed, 0);
        assert_eq!(o.embedded, r.index.shards[k].items);
    }
    // A finished shard is left as it is.
    let again = write_shard(&e, &id, &run, 2, 4, WAIT).unwrap();
    assert_eq!(again.embedded, 0);
    let out = tmp.path().join("merged.jsonl");
    let m = merge(&run, &out).unwrap();
    assert_eq!((m.items, m.shards), (23, 4));
    assert_eq!(std::fs::read(&out).unwrap(), single_process(&e, &input));
}

#[test]
fn a_shard_cut_short_by_a_killed_worker_continues_where_its_durable_part_ends() {
    let Started {
        e,
        tmp,
        input,
        run,
        id,
    } = start(10);
    let reference = single_process(&e, &input);
    // What a worker had made durable of shard 1 (items 10..13) before it was killed in the
    // middle of writing item 13's record: three committed records and a torn fourth.
    let path = shard_path(&run, 1);
    let lines: Vec<&[u8]> = reference.split_inclusive(|&b| b == b'\n').collect();
    let span = shards::load_run(&run).unwrap().index.shards[1].clone();
    let (mut d, _) = DurableOutput::open_from(&path, id.clone(), "in", 10).unwrap();
    let committed: Vec<u8> = lines[10..13].concat();
    d.append(&committed, 3);
    // The input prefix of those three items, as the worker recorded it.
    let bytes = std::fs::read(&input).unwrap();
    let slice = &bytes[span.offset as usize..(span.offset + span.len) as usize];
    let ends: Vec<usize> = slice
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    // Item 10 is followed by a blank line: items 10, 11, 12 end at newlines 0, 2, 3.
    let end = ends[3];
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&slice[..end]);
    d.commit(end as u64, &h).unwrap();
    drop(d);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, &lines[13][..20]).unwrap();
    drop(f);

    let o = write_shard(&e, &id, &run, 1, 2, WAIT).unwrap();
    assert_eq!((o.resumed, o.embedded), (3, 7));
    for k in [0, 2] {
        write_shard(&e, &id, &run, k, 4, WAIT).unwrap();
    }
    let out = tmp.path().join("merged.jsonl");
    merge(&run, &out).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), reference);
}

#[test]
fn resumes_with_other_settings_or_input_and_unfinished_merges_are_refused() {
    let Started {
        e,
        tmp,
        input,
        run,
        id,
    } = start(8);
    write_shard(&e, &id, &run, 0, 8, WAIT).unwrap();

    let err = merge(&run, &tmp.path().join("m.jsonl")).unwrap_err();
    assert!(
        err.to_string()
            .contains("2 of 3 shards are not finished (first: 1, 2)"),
        "{err}"
    );
    assert!(!tmp.path().join("m.jsonl").exists());

    let mut other = id.clone();
    other.normalize = !other.normalize;
    let index = shards::index_input(&input, true, 8).unwrap();
    let err = prepare_run(&run, other.clone(), index.clone()).unwrap_err();
    assert!(err.to_string().contains("other settings"), "{err}");
    let err = write_shard(&e, &other, &run, 1, 8, WAIT).unwrap_err();
    assert!(err.to_string().contains("identity"), "{err}");

    let mut text = std::fs::read_to_string(&input).unwrap();
    text = text.replacen("fn f3()", "fn g3()", 1);
    std::fs::write(&input, &text).unwrap();
    let changed = shards::index_input(&input, true, 8).unwrap();
    let err = prepare_run(&run, id.clone(), changed).unwrap_err();
    assert!(err.to_string().contains("the input changed"), "{err}");
}

#[test]
fn two_writers_of_one_shard_cannot_both_run() {
    // `_tmp` holds the run directory for the test's length.
    let Started {
        e,
        tmp: _tmp,
        run,
        id,
        ..
    } = start(8);
    let lock = std::fs::File::create(shard_path(&run, 1).with_extension("lock")).unwrap();
    lock.lock().unwrap();
    let err = write_shard(&e, &id, &run, 1, 8, Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("another worker"), "{err}");
    // A second writer waits for the first, then finds the shard done.
    let (e2, id2, run2) = (embedder(), id.clone(), run.clone());
    let second = std::thread::spawn(move || write_shard(&e2, &id2, &run2, 1, 8, WAIT));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(write_shard_unlocked(&e, &id, &run, lock), 8);
    let o = second.join().unwrap().unwrap();
    assert_eq!((o.resumed, o.embedded), (8, 0));
}

/// Writes shard 1 as the holder of `lock` would (a lock on another open file of the same path
/// stays exclusive to it), then releases the lock.
fn write_shard_unlocked(e: &Embedder, id: &RunIdentity, run: &Path, lock: std::fs::File) -> u64 {
    let path = shard_path(run, 1);
    let r = shards::load_run(run).unwrap();
    let span = &r.index.shards[1];
    let (mut d, _) = DurableOutput::open_from(&path, id.clone(), "in", span.start).unwrap();
    let input = std::fs::read(&r.index.input).unwrap();
    let slice = &input[span.offset as usize..(span.offset + span.len) as usize];
    let out = records(e, std::str::from_utf8(slice).unwrap(), span.start);
    d.append(&out, span.items);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(slice);
    d.finish(slice.len() as u64, &h).unwrap();
    drop(lock);
    span.items
}

#[test]
fn bad_inputs_and_shard_sizes_are_errors_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.jsonl");
    std::fs::write(&p, "{\"text\":\"a\"}\n{\"txt\":\"b\"}\n").unwrap();
    let err = shards::index_input(&p, true, 4).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
    std::fs::write(&p, "{\"id\":1,\"text\":\"a\"}\n{\"id\":1,\"text\":\"b\"}\n").unwrap();
    let err = shards::index_input(&p, true, 4).unwrap_err();
    assert!(err.to_string().contains("duplicate ids"), "{err}");
    assert!(shards::index_input(&p, true, 0).is_err());
    // Plain lines: every line is an item, an empty one too.
    std::fs::write(&p, "a\n\nb\n").unwrap();
    let idx = shards::index_input(&p, false, 2).unwrap();
    assert_eq!((idx.items, idx.shards.len()), (3, 2));
}
