//! Durable, resumable corpus runs: the output JSON Lines file is appended in commits that are
//! fsync'd before they count as done, next to a sidecar manifest (`FILE.manifest.json`) that
//! records what produced it (model hash, numerics version, output-affecting settings) and the
//! progress. A restarted run verifies the manifest, repairs a torn last record, skips exactly
//! the items already in the file and appends the rest, so the finished file is byte-identical
//! to an uninterrupted run (embeddings do not depend on batch size or thread count).
//!
//! The output file is the truth about progress: complete lines are complete records (each was
//! written by the same deterministic computation), a partial last line is cut off. The
//! manifest's progress lags at most one commit and only serves the input check.

use crate::error::{InferError, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

pub const MANIFEST_FORMAT: &str = "kin-infer-manifest/1";

/// Everything that decides the output bytes, compared on resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// xxh3-128 over the model directory's `.json` and `.safetensors` files.
    pub model_hash: String,
    pub numerics_version: String,
    pub pooling: String,
    pub normalize: bool,
    pub max_length: usize,
    pub dimensions: Option<usize>,
    /// Input format: "lines" or "jsonl".
    pub input_format: String,
}

impl RunIdentity {
    /// The identity of embedding `input_format` ("lines" or "jsonl") input with `e`.
    pub fn of(e: &crate::Embedder, input_format: &str) -> Result<Self> {
        Ok(RunIdentity {
            model_hash: model_hash(&e.info().dir)?,
            numerics_version: e.numerics().version().into(),
            pooling: e.pooling().name(),
            normalize: e.normalize(),
            max_length: e.max_length(),
            dimensions: e.dimensions(),
            input_format: input_format.into(),
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Items whose records are durable in the output.
    pub items: u64,
    /// Output bytes holding them.
    pub output_bytes: u64,
    /// Input bytes consumed to produce them, and the xxh3-128 of that input prefix.
    pub input_bytes: u64,
    pub input_prefix_hash: String,
    pub complete: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub identity: RunIdentity,
    pub input: String,
    pub progress: Progress,
}

/// Hash of the files that decide a model's outputs (configs, tokenizer, weights), in
/// path order; for a single-file model (GGUF), that file.
pub fn model_hash(dir: &Path) -> Result<String> {
    let mut files = Vec::new();
    let (dir, files) = if dir.is_file() {
        let parent = dir.parent().unwrap_or(Path::new(""));
        files.push(PathBuf::from(dir.file_name().unwrap_or_default()));
        (parent, files)
    } else {
        collect(dir, dir, &mut files)?;
        files.sort();
        (dir, files)
    };
    let mut h = Xxh3::new();
    for rel in &files {
        let path = dir.join(rel);
        let f = File::open(&path).map_err(|e| InferError::io(&path, e))?;
        // SAFETY: read-only private map of a file we only read.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| InferError::io(&path, e))?;
        h.update(rel.to_string_lossy().as_bytes());
        h.update(&(map.len() as u64).to_le_bytes());
        h.update(&map);
    }
    Ok(format!("xxh3-128:{:032x}", h.digest128()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| InferError::io(dir, e))?;
    for e in rd {
        let e = e.map_err(|e| InferError::io(dir, e))?;
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            collect(root, &p, out)?;
        } else if name.ends_with(".json") || name.ends_with(".safetensors") {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
    Ok(())
}

/// Appends `v` as a JSON array of shortest round-trip f32 literals.
pub fn push_f32_array(out: &mut String, v: &[f32]) {
    let mut buf = ryu::Buffer::new();
    out.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(buf.format_finite(*x));
    }
    out.push(']');
}

/// Appends one output record of `kin-infer embed`, `{"index":i,"id":...,"embedding":[...]}`
/// and a newline: the one writer of the corpus format, so that a sharded run's records are
/// the same bytes as a single process's. A non-finite value is an error naming the item.
pub fn push_record(
    line: &mut String,
    index: u64,
    id: Option<&serde_json::Value>,
    v: &[f32],
) -> Result<()> {
    if v.iter().any(|x| !x.is_finite()) {
        return Err(InferError::Input(format!(
            "item {index}: the model produced a non-finite value (check the weights)"
        )));
    }
    line.push_str("{\"index\":");
    line.push_str(&index.to_string());
    line.push_str(",\"id\":");
    match id {
        Some(v) => line.push_str(&v.to_string()),
        None => line.push_str("null"),
    }
    line.push_str(",\"embedding\":");
    push_f32_array(line, v);
    line.push_str("}\n");
    Ok(())
}

pub fn manifest_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".manifest.json");
    output.with_file_name(name)
}

/// `index` and `id` of an output's last complete record.
pub type LastRecord = Option<(u64, serde_json::Value)>;

/// Where a resumed run starts.
#[derive(Debug)]
pub struct ResumePoint {
    pub items: u64,
    /// Bytes cut from a torn last record (0 when the file ended on a record boundary).
    pub repaired_bytes: u64,
    /// The previous run's manifest progress (to check the input prefix).
    pub previous: Progress,
    /// `index` and `id` of the last persisted record, to check against the input.
    pub last_record: LastRecord,
}

/// The append-only output of a durable run.
pub struct DurableOutput {
    file: File,
    path: PathBuf,
    manifest_path: PathBuf,
    manifest: Manifest,
    pending: Vec<u8>,
    pending_items: u64,
}

impl DurableOutput {
    /// Opens (or creates) `output` for a durable run. An existing manifest must match
    /// `identity` (else [`InferError::Input`]); an existing output without a manifest is
    /// refused rather than overwritten.
    pub fn open(output: &Path, identity: RunIdentity, input: &str) -> Result<(Self, ResumePoint)> {
        Self::open_from(output, identity, input, 0)
    }

    /// [`DurableOutput::open`] for an output whose first record has index `first_index` (a
    /// shard of a larger run, [`crate::shards`]).
    pub fn open_from(
        output: &Path,
        identity: RunIdentity,
        input: &str,
        first_index: u64,
    ) -> Result<(Self, ResumePoint)> {
        let mpath = manifest_path(output);
        let refuse = |reason: String| {
            InferError::Input(format!("cannot resume into {}: {reason}", output.display()))
        };
        let (manifest, previous) = if mpath.is_file() {
            let m: Manifest = crate::io::read_json(&mpath)?;
            if m.format != MANIFEST_FORMAT {
                return Err(refuse(format!(
                    "manifest format `{}` (expected {MANIFEST_FORMAT})",
                    m.format
                )));
            }
            if m.identity != identity {
                return Err(refuse(identity_diff(&m.identity, &identity)));
            }
            let prev = m.progress.clone();
            (m, prev)
        } else {
            if output.metadata().is_ok_and(|md| md.len() > 0) {
                return Err(refuse(format!(
                    "it exists but has no manifest {} (not written by a --resume run); remove it or choose another output",
                    mpath.display()
                )));
            }
            let m = Manifest {
                format: MANIFEST_FORMAT.into(),
                identity,
                input: input.to_string(),
                progress: Progress::default(),
            };
            (m, Progress::default())
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(output)
            .map_err(|e| InferError::io(output, e))?;
        let (good_len, items, last) = scan(&mut file, output, first_index)?;
        let len = file
            .metadata()
            .map_err(|e| InferError::io(output, e))?
            .len();
        if good_len < len {
            file.set_len(good_len)
                .map_err(|e| InferError::io(output, e))?;
            file.sync_all().map_err(|e| InferError::io(output, e))?;
        }
        file.seek(SeekFrom::End(0))
            .map_err(|e| InferError::io(output, e))?;
        let mut out = DurableOutput {
            file,
            path: output.to_path_buf(),
            manifest_path: mpath,
            manifest,
            pending: Vec::new(),
            pending_items: 0,
        };
        // A manifest that never recorded a commit is (re)written as it was read: its progress
        // must stay the consistent triple (items, input bytes, input hash) of one commit. The
        // items found in the output (a kill between the output's fsync and the first manifest
        // update) are only counted in memory, for the next commit.
        if previous.items == 0 && previous.input_bytes == 0 {
            out.write_manifest()?;
        }
        out.manifest.progress.items = items;
        out.manifest.progress.output_bytes = good_len;
        Ok((
            out,
            ResumePoint {
                items,
                repaired_bytes: len - good_len,
                previous,
                last_record: last,
            },
        ))
    }

    /// Queues records (complete lines) for `items` items; durable after [`Self::commit`].
    pub fn append(&mut self, records: &[u8], items: u64) {
        self.pending.extend_from_slice(records);
        self.pending_items += items;
    }

    pub fn pending_items(&self) -> u64 {
        self.pending_items
    }

    /// Writes and fsyncs the queued records, then records the progress (with the input
    /// consumed so far) in the manifest. Returns the number of items made durable.
    pub fn commit(&mut self, input_bytes: u64, input_prefix: &Xxh3) -> Result<u64> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        let io = |e| InferError::io(&self.path, e);
        self.file.write_all(&self.pending).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        let n = self.pending_items;
        let p = &mut self.manifest.progress;
        p.items += n;
        p.output_bytes += self.pending.len() as u64;
        p.input_bytes = input_bytes;
        p.input_prefix_hash = format!("{:032x}", input_prefix.digest128());
        self.pending.clear();
        self.pending_items = 0;
        self.write_manifest()?;
        Ok(n)
    }

    /// Marks the run complete.
    pub fn finish(mut self, input_bytes: u64, input_prefix: &Xxh3) -> Result<()> {
        self.commit(input_bytes, input_prefix)?;
        self.manifest.progress.complete = true;
        self.write_manifest()
    }

    /// Write to a temporary file and rename: a reader never sees a half-written manifest.
    fn write_manifest(&self) -> Result<()> {
        let tmp = self.manifest_path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.manifest).unwrap_or_default();
        std::fs::write(&tmp, text + "\n").map_err(|e| InferError::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.manifest_path)
            .map_err(|e| InferError::io(&self.manifest_path, e))
    }
}

/// (bytes up to the last newline, complete lines, the last complete record's index and id);
/// records are numbered from `first`.
fn scan(file: &mut File, path: &Path, first: u64) -> Result<(u64, u64, LastRecord)> {
    file.seek(SeekFrom::Start(0))
        .map_err(|e| InferError::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut pos, mut good, mut lines) = (0u64, 0u64, 0u64);
    let mut last_line_start = 0u64;
    let mut prev_line_start = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| InferError::io(path, e))?;
        if n == 0 {
            break;
        }
        for (i, b) in buf[..n].iter().enumerate() {
            if *b == b'\n' {
                lines += 1;
                prev_line_start = last_line_start;
                good = pos + i as u64 + 1;
                last_line_start = good;
            }
        }
        pos += n as u64;
    }
    if lines == 0 {
        return Ok((0, 0, None));
    }
    // Check the last complete record: it must be one of ours, numbered in order.
    file.seek(SeekFrom::Start(prev_line_start))
        .map_err(|e| InferError::io(path, e))?;
    let mut last = vec![0u8; (good - prev_line_start) as usize];
    file.read_exact(&mut last)
        .map_err(|e| InferError::io(path, e))?;
    let bad = |why: &str| {
        InferError::Input(format!(
            "{}: last complete record {why}; not a kin-infer output",
            path.display()
        ))
    };
    let v: serde_json::Value = serde_json::from_slice(&last).map_err(|_| bad("is not JSON"))?;
    let index = v
        .get("index")
        .and_then(|i| i.as_u64())
        .ok_or_else(|| bad("has no index"))?;
    if index != first + lines - 1 {
        return Err(bad(&format!(
            "has index {index}, expected {}",
            first + lines - 1
        )));
    }
    let id = v.get("id").cloned().unwrap_or(serde_json::Value::Null);
    Ok((good, lines, Some((index, id))))
}

fn identity_diff(old: &RunIdentity, new: &RunIdentity) -> String {
    /// A setting's name and how it reads in messages.
    type Setting = (&'static str, fn(&RunIdentity) -> String);
    // The ones that differ are named.
    let settings: [Setting; 7] = [
        ("model", |r| r.model_hash.clone()),
        ("numerics version", |r| r.numerics_version.clone()),
        ("pooling", |r| r.pooling.clone()),
        ("normalize", |r| r.normalize.to_string()),
        ("max length", |r| r.max_length.to_string()),
        ("dimensions", |r| format!("{:?}", r.dimensions)),
        ("input format", |r| r.input_format.clone()),
    ];
    let d: Vec<String> = settings
        .iter()
        .filter_map(|(what, read)| {
            let (before, now) = (read(old), read(new));
            (before != now).then(|| match *what {
                "model" => format!("the model differs ({before} before, {now} now)"),
                _ => format!("{what} {before} before, {now} now"),
            })
        })
        .collect();
    format!("settings changed since the run began: {}", d.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> RunIdentity {
        RunIdentity {
            model_hash: "m".into(),
            numerics_version: "n".into(),
            pooling: "mean".into(),
            normalize: true,
            max_length: 8,
            dimensions: None,
            input_format: "lines".into(),
        }
    }

    #[test]
    fn identity_diff_names_each_changed_setting() {
        let old = identity();
        let mut new = identity();
        new.model_hash = "m2".into();
        new.dimensions = Some(4);
        new.normalize = false;
        assert_eq!(
            identity_diff(&old, &new),
            "settings changed since the run began: the model differs (m before, m2 now); \
             normalize true before, false now; dimensions None before, Some(4) now"
        );
    }

    /// A kill after the output's first fsync but before the manifest recorded that commit
    /// leaves records the manifest does not count. Resuming (and being killed again before
    /// committing) must keep the manifest's progress a consistent commit: items 0 with no
    /// input hash, not the scanned item count with an empty hash (which made the next resume
    /// refuse the unchanged input as "changed").
    #[test]
    fn records_past_the_last_manifest_commit_never_enter_the_recorded_progress() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o.jsonl");
        let (first, at) = DurableOutput::open(&out, identity(), "in").unwrap();
        assert_eq!(at.items, 0);
        drop(first);
        // The output's records, durable, but no manifest update (killed in between).
        std::fs::write(&out, "{\"index\":0}\n{\"index\":1}\n{\"index\":2}\n").unwrap();
        let (second, at) = DurableOutput::open(&out, identity(), "in").unwrap();
        assert_eq!((at.items, at.previous.items), (3, 0));
        drop(second); // killed again before its first commit
        let (_, at) = DurableOutput::open(&out, identity(), "in").unwrap();
        assert_eq!(at.items, 3);
        assert_eq!(
            (at.previous.items, at.previous.input_bytes),
            (0, 0),
            "the recorded progress must be a real commit"
        );
    }
}
