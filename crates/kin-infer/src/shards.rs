//! A corpus run split into shards, for many workers (the Python package's Ray runner): the
//! input is indexed once into contiguous spans of items, each span is embedded by whichever
//! worker takes it into its own durable output ([`crate::corpus::DurableOutput`], the format
//! of `kin-infer embed --resume`: fsync'd commits and a manifest), and [`merge`] concatenates
//! the finished shards into one file. Records are written by the one record writer
//! ([`crate::corpus::push_record`]) with their global index, and an embedding does not depend
//! on the batch it was computed in, so the merged file is byte-identical to a single
//! `kin-infer embed` of the same input.
//!
//! Layout of a run directory: `run.json` (the [`RunManifest`]: identity, input checksum and
//! spans), `shards/shard-NNNNNN.jsonl` and their `.manifest.json` beside them.

use crate::corpus::{push_record, DurableOutput, Manifest, RunIdentity, MANIFEST_FORMAT};
use crate::embed::Embedder;
use crate::error::{InferError, Result};
use crate::io::input_line::{parse_line, Item, LineError};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

pub const RUN_FORMAT: &str = "kin-infer-shards/1";

/// Items `start..start + items` of the input, at bytes `offset..offset + len` of the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpan {
    pub start: u64,
    pub items: u64,
    pub offset: u64,
    pub len: u64,
}

/// The input of a sharded run: its size and checksum, and its spans.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIndex {
    pub input: String,
    /// "lines" or "jsonl", as `kin-infer embed` reads it.
    pub input_format: String,
    pub items: u64,
    pub bytes: u64,
    /// xxh3-128 of the whole input file.
    pub hash: String,
    pub shard_items: u64,
    pub shards: Vec<ShardSpan>,
}

/// `run.json`: what a run computes and from what. A resumed run must match it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunManifest {
    pub format: String,
    pub identity: RunIdentity,
    pub index: InputIndex,
}

fn line_error(name: &str, no: u64, e: LineError) -> InferError {
    InferError::Input(match e {
        LineError::NotUtf8 => format!("{name}: line {no} is not valid UTF-8"),
        LineError::Json(e) => format!("{name}: line {no}: not valid JSON: {e}"),
        LineError::NotObject => {
            format!("{name}: line {no}: expected a JSON object with a string `text`")
        }
        LineError::NoText => format!("{name}: line {no}: the object has no string field `text`"),
    })
}

fn format_name(jsonl: bool) -> &'static str {
    if jsonl {
        "jsonl"
    } else {
        "lines"
    }
}

/// Reads the whole input once, as `kin-infer embed` validates it (every line parses, no id
/// repeats), and cuts it into spans of `shard_items` items.
pub fn index_input(path: &Path, jsonl: bool, shard_items: u64) -> Result<InputIndex> {
    if shard_items == 0 {
        return Err(InferError::Input(
            "shard size must be at least 1 item".into(),
        ));
    }
    let name = path.display().to_string();
    let f = File::open(path).map_err(|e| InferError::io(path, e))?;
    let mut r = BufReader::with_capacity(1 << 16, f);
    let (mut buf, mut hash) = (Vec::new(), Xxh3::new());
    let (mut offset, mut line_no, mut items) = (0u64, 0u64, 0u64);
    let mut seen: HashSet<u128> = HashSet::new();
    let mut dups: Vec<String> = Vec::new();
    let mut shards: Vec<ShardSpan> = Vec::new();
    let mut open = ShardSpan {
        start: 0,
        items: 0,
        offset: 0,
        len: 0,
    };
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| InferError::io(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        hash.update(&buf);
        offset += n as u64;
        let item = parse_line(&buf, jsonl).map_err(|e| line_error(&name, line_no, e))?;
        open.len = offset - open.offset;
        let Some(item) = item else { continue };
        if let Some(id) = &item.id {
            let repr = id.to_string();
            if !seen.insert(xxh3_128(repr.as_bytes())) && dups.len() < 5 && !dups.contains(&repr) {
                dups.push(repr);
            }
        }
        items += 1;
        open.items += 1;
        if open.items == shard_items {
            shards.push(open.clone());
            open = ShardSpan {
                start: items,
                items: 0,
                offset,
                len: 0,
            };
        }
    }
    if !dups.is_empty() {
        return Err(InferError::Input(format!(
            "{name}: duplicate ids (each record must have its own): {}",
            dups.join(", ")
        )));
    }
    if open.items > 0 {
        shards.push(open);
    } else if let Some(last) = shards.last_mut() {
        // Trailing blank lines belong to the last span (they are read and skipped there).
        last.len = offset - last.offset;
    }
    Ok(InputIndex {
        input: name,
        input_format: format_name(jsonl).into(),
        items,
        bytes: offset,
        hash: format!("{:032x}", hash.digest128()),
        shard_items,
        shards,
    })
}

/// Where shard `k` of a run in `dir` is written.
pub fn shard_path(dir: &Path, k: usize) -> PathBuf {
    dir.join("shards").join(format!("shard-{k:06}.jsonl"))
}

fn run_path(dir: &Path) -> PathBuf {
    dir.join("run.json")
}

/// Starts or resumes a run in `dir`: writes `run.json`, or checks that the one there was
/// made for the same identity and the same input (size and checksum).
pub fn prepare_run(dir: &Path, identity: RunIdentity, index: InputIndex) -> Result<RunManifest> {
    std::fs::create_dir_all(dir.join("shards")).map_err(|e| InferError::io(dir, e))?;
    let path = run_path(dir);
    let run = RunManifest {
        format: RUN_FORMAT.into(),
        identity,
        index,
    };
    if path.is_file() {
        let old = load_run(dir)?;
        let refuse = |why: String| {
            InferError::Input(format!("cannot resume the run in {}: {why}", dir.display()))
        };
        if old.identity != run.identity {
            return Err(refuse(format!(
                "it was made with other settings or another model ({:?} before, {:?} now)",
                old.identity, run.identity
            )));
        }
        let (a, b) = (&old.index, &run.index);
        if (a.bytes, &a.hash, a.items) != (b.bytes, &b.hash, b.items) {
            return Err(refuse(format!(
                "the input changed ({} items, {} bytes, xxh3 {} before; {} items, {} bytes, xxh3 {} now)",
                a.items, a.bytes, a.hash, b.items, b.bytes, b.hash
            )));
        }
        return Ok(old);
    }
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(&run).unwrap_or_default() + "\n";
    write_synced(&tmp, text.as_bytes())?;
    std::fs::rename(&tmp, &path).map_err(|e| InferError::io(&path, e))?;
    Ok(run)
}

/// The `run.json` of the run in `dir`.
pub fn load_run(dir: &Path) -> Result<RunManifest> {
    let run: RunManifest = crate::io::read_json(&run_path(dir))?;
    if run.format != RUN_FORMAT {
        return Err(InferError::Input(format!(
            "{}: format `{}` (expected {RUN_FORMAT})",
            run_path(dir).display(),
            run.format
        )));
    }
    Ok(run)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(|e| InferError::io(path, e))?;
    f.write_all(bytes).map_err(|e| InferError::io(path, e))?;
    f.sync_all().map_err(|e| InferError::io(path, e))
}

/// A shard's manifest, if it has one.
fn shard_manifest(path: &Path) -> Result<Option<Manifest>> {
    let m = crate::corpus::manifest_path(path);
    if !m.is_file() {
        return Ok(None);
    }
    crate::io::read_json(&m).map(Some)
}

/// Whether shard `k` is finished: its manifest is complete, for this run's identity, and
/// counts the span's items.
pub fn shard_done(dir: &Path, run: &RunManifest, k: usize) -> Result<bool> {
    let Some(span) = run.index.shards.get(k) else {
        return Ok(false);
    };
    Ok(shard_manifest(&shard_path(dir, k))?.is_some_and(|m| {
        m.format == MANIFEST_FORMAT
            && m.identity == run.identity
            && m.progress.complete
            && m.progress.items == span.items
    }))
}

/// Shards of the run not finished yet, in order.
pub fn pending_shards(dir: &Path, run: &RunManifest) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    for k in 0..run.index.shards.len() {
        if !shard_done(dir, run, k)? {
            v.push(k);
        }
    }
    Ok(v)
}

/// What [`write_shard`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardOutcome {
    /// Items found already durable in the shard (a resumed shard).
    pub resumed: u64,
    /// Items embedded now.
    pub embedded: u64,
}

/// Embeds shard `k` of the run in `dir` with `e` (which must be the run's model and
/// settings: checked through the identity), `batch_size` texts per forward pass and a commit
/// after each. A shard left half-written by a killed worker is continued where its durable
/// part ends; a finished shard is left as is. An exclusive lock on the shard keeps two
/// workers from writing it at once.
pub fn write_shard(
    e: &Embedder,
    identity: &RunIdentity,
    dir: &Path,
    k: usize,
    batch_size: usize,
    lock_wait: Duration,
) -> Result<ShardOutcome> {
    let run = load_run(dir)?;
    if &run.identity != identity {
        return Err(InferError::Input(format!(
            "{}: this embedder's identity {identity:?} is not the run's {:?}",
            dir.display(),
            run.identity
        )));
    }
    let span = run.index.shards.get(k).ok_or_else(|| {
        InferError::Input(format!(
            "{}: no shard {k} (the run has {})",
            dir.display(),
            run.index.shards.len()
        ))
    })?;
    let out = shard_path(dir, k);
    let lock_path = out.with_extension("lock");
    let lock = File::create(&lock_path).map_err(|e| InferError::io(&lock_path, e))?;
    let t0 = Instant::now();
    while lock.try_lock().is_err() {
        if t0.elapsed() >= lock_wait {
            return Err(InferError::Input(format!(
                "{}: another worker is writing this shard (waited {:.1} s)",
                out.display(),
                lock_wait.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let input = Path::new(&run.index.input);
    let (durable, at) =
        DurableOutput::open_from(&out, identity.clone(), &run.index.input, span.start)?;
    let mut durable = Box::new(durable);
    if shard_done(dir, &run, k)? {
        return Ok(ShardOutcome {
            resumed: at.items,
            embedded: 0,
        });
    }
    let bytes = read_span(input, span)?;
    let items = parse_span(&bytes, &run.index, span)?;
    if at.items > span.items {
        return Err(InferError::Input(format!(
            "{} holds {} records but its span has {} items: not this run's shard",
            out.display(),
            at.items,
            span.items
        )));
    }
    let prev = &at.previous;
    if prev.items > 0 {
        let end = items
            .get(prev.items as usize - 1)
            .map_or(u64::MAX, |&(_, end)| end);
        let mut h = Xxh3::new();
        h.update(&bytes[..end.min(bytes.len() as u64) as usize]);
        if end != prev.input_bytes || format!("{:032x}", h.digest128()) != prev.input_prefix_hash {
            return Err(InferError::Input(format!(
                "{}: the input changed since this shard began",
                out.display()
            )));
        }
    }
    let mut line = String::new();
    let mut index = at.items as usize;
    let batch_size = batch_size.max(1);
    while index < items.len() {
        let batch = &items[index..(index + batch_size).min(items.len())];
        let texts: Vec<&str> = batch.iter().map(|(it, _)| it.text.as_str()).collect();
        let vecs = e.embed_texts(&texts)?;
        line.clear();
        for (i, ((item, _), v)) in batch.iter().zip(&vecs).enumerate() {
            push_record(
                &mut line,
                span.start + (index + i) as u64,
                item.id.as_ref(),
                v,
            )?;
        }
        durable.append(line.as_bytes(), batch.len() as u64);
        index += batch.len();
        let end = batch.last().map_or(0, |&(_, end)| end);
        let mut h = Xxh3::new();
        h.update(&bytes[..end as usize]);
        durable.commit(end, &h)?;
    }
    let mut h = Xxh3::new();
    h.update(&bytes);
    durable.finish(bytes.len() as u64, &h)?;
    drop(lock);
    Ok(ShardOutcome {
        resumed: at.items,
        embedded: items.len() as u64 - at.items,
    })
}

fn read_span(input: &Path, span: &ShardSpan) -> Result<Vec<u8>> {
    let mut f = File::open(input).map_err(|e| InferError::io(input, e))?;
    let len = f.metadata().map_err(|e| InferError::io(input, e))?.len();
    if span
        .offset
        .checked_add(span.len)
        .is_none_or(|end| end > len)
    {
        return Err(InferError::Input(format!(
            "{}: the input is shorter than the run's index says (it changed?)",
            input.display()
        )));
    }
    f.seek(SeekFrom::Start(span.offset))
        .map_err(|e| InferError::io(input, e))?;
    let mut bytes = vec![0u8; span.len as usize];
    f.read_exact(&mut bytes)
        .map_err(|e| InferError::io(input, e))?;
    Ok(bytes)
}

/// The span's items, each with the offset (in the span) where its line ends.
fn parse_span(bytes: &[u8], index: &InputIndex, span: &ShardSpan) -> Result<Vec<(Item, u64)>> {
    let jsonl = index.input_format == "jsonl";
    let mut items = Vec::with_capacity(span.items as usize);
    let mut pos = 0usize;
    while pos < bytes.len() {
        let end = bytes[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| pos + i + 1);
        let item = parse_line(&bytes[pos..end], jsonl).map_err(|e| {
            line_error(&index.input, 0, e) // the input changed after it was indexed
        })?;
        if let Some(item) = item {
            items.push((item, end as u64));
        }
        pos = end;
    }
    if items.len() as u64 != span.items {
        return Err(InferError::Input(format!(
            "{}: bytes {}..{} hold {} items, the run's index says {} (the input changed?)",
            index.input,
            span.offset,
            span.offset + span.len,
            items.len(),
            span.items
        )));
    }
    Ok(items)
}

/// What [`merge`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeReport {
    pub items: u64,
    pub bytes: u64,
    pub shards: usize,
}

/// Concatenates the finished shards of the run in `dir` into `out` (written to a temporary
/// file, fsync'd and renamed into place): one JSON Lines file, byte-identical to
/// `kin-infer embed` of the same input with the same model and settings. Every shard must be
/// finished, for this run, and hold exactly its span's bytes.
pub fn merge(dir: &Path, out: &Path) -> Result<MergeReport> {
    let run = load_run(dir)?;
    let pending = pending_shards(dir, &run)?;
    if !pending.is_empty() {
        let list: Vec<String> = pending.iter().take(8).map(|k| k.to_string()).collect();
        return Err(InferError::Input(format!(
            "{}: {} of {} shards are not finished (first: {}); run the embedding again to finish them",
            dir.display(),
            pending.len(),
            run.index.shards.len(),
            list.join(", ")
        )));
    }
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    let tmp = out.with_file_name(name);
    let mut w = std::io::BufWriter::with_capacity(
        1 << 20,
        File::create(&tmp).map_err(|e| InferError::io(&tmp, e))?,
    );
    let mut bytes = 0u64;
    let copied = (|| -> Result<()> {
        for k in 0..run.index.shards.len() {
            let path = shard_path(dir, k);
            let m = shard_manifest(&path)?.unwrap_or_else(|| unreachable!("checked finished"));
            let data = std::fs::read(&path).map_err(|e| InferError::io(&path, e))?;
            if data.len() as u64 != m.progress.output_bytes {
                return Err(InferError::Input(format!(
                    "{}: {} bytes, its manifest says {}",
                    path.display(),
                    data.len(),
                    m.progress.output_bytes
                )));
            }
            w.write_all(&data).map_err(|e| InferError::io(&tmp, e))?;
            bytes += data.len() as u64;
        }
        let f = w
            .into_inner()
            .map_err(|e| InferError::io(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| InferError::io(&tmp, e))
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(|e| InferError::io(out, e))?;
    Ok(MergeReport {
        items: run.index.items,
        bytes,
        shards: run.index.shards.len(),
    })
}
