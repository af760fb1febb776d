//! Reading `embed` / `bench` input: one text per line, or JSON Lines objects with a string
//! `text` and an optional `id`. Files are streamed (memory does not grow with their size);
//! stdin, which cannot be read twice, is held in memory.

use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

pub use kin_infer::io::input_line::Item;
use kin_infer::io::input_line::{parse_line, LineError};

/// Where the input comes from; opened once for validation and once for the run.
pub enum Source {
    File(PathBuf),
    Memory(Vec<u8>),
}

impl Source {
    pub fn new(path: Option<&Path>) -> Result<Self> {
        Ok(match path {
            Some(p) => {
                std::fs::File::open(p)
                    .with_context(|| format!("cannot read input {}", p.display()))?;
                Source::File(p.to_path_buf())
            }
            None => {
                let mut buf = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut buf)
                    .context("cannot read standard input")?;
                Source::Memory(buf)
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Memory(_) => "<stdin>".into(),
        }
    }

    pub fn reader(&self, jsonl: bool) -> Result<Reader<'_>> {
        let inner: Box<dyn BufRead + '_> = match self {
            Source::File(p) => Box::new(BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(p)
                    .with_context(|| format!("cannot read input {}", p.display()))?,
            )),
            Source::Memory(b) => Box::new(&b[..]),
        };
        Ok(Reader {
            inner,
            jsonl,
            name: self.name(),
            line: 0,
            bytes: 0,
            hash: Xxh3::new(),
            buf: Vec::new(),
        })
    }
}

/// Streams items, counting lines and hashing the bytes consumed (the durable run records
/// the input prefix it has embedded).
pub struct Reader<'a> {
    inner: Box<dyn BufRead + 'a>,
    jsonl: bool,
    name: String,
    line: usize,
    bytes: u64,
    hash: Xxh3,
    buf: Vec<u8>,
}

impl Reader<'_> {
    /// Input bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// xxh3-128 of the bytes consumed so far.
    pub fn hasher(&self) -> &Xxh3 {
        &self.hash
    }

    pub fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            self.buf.clear();
            let n = self
                .inner
                .read_until(b'\n', &mut self.buf)
                .with_context(|| format!("cannot read {}", self.name))?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            self.bytes += n as u64;
            self.hash.update(&self.buf);
            let (source, no) = (&self.name, self.line);
            match parse_line(&self.buf, self.jsonl) {
                Ok(Some(item)) => return Ok(Some(item)),
                Ok(None) => continue,
                Err(LineError::NotUtf8) => bail!("{source}: line {no} is not valid UTF-8"),
                Err(LineError::Json(e)) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("{source}: line {no}: not valid JSON")))
                }
                Err(LineError::NotObject) => {
                    bail!("{source}: line {no}: expected a JSON object with a string `text`")
                }
                Err(LineError::NoText) => {
                    bail!("{source}: line {no}: the object has no string field `text`")
                }
            }
        }
    }

    /// Reads up to `n` items.
    pub fn next_batch(&mut self, n: usize) -> Result<Vec<Item>> {
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            match self.next_item()? {
                Some(i) => v.push(i),
                None => break,
            }
        }
        Ok(v)
    }
}

/// Validates the whole input before any work: every line parses, and no id repeats (the
/// first repeated ids are listed). Returns the number of items. Holds 16 bytes per id.
pub fn validate(source: &Source, jsonl: bool) -> Result<u64> {
    let mut r = source.reader(jsonl)?;
    let mut seen: HashSet<u128> = HashSet::new();
    let mut dups: Vec<String> = Vec::new();
    let mut n = 0u64;
    while let Some(item) = r.next_item()? {
        n += 1;
        if let Some(id) = &item.id {
            let repr = id.to_string();
            if !seen.insert(xxh3_128(repr.as_bytes())) && dups.len() < 5 && !dups.contains(&repr) {
                dups.push(repr);
            }
        }
    }
    if !dups.is_empty() {
        bail!(
            "{}: duplicate ids (each record must have its own): {}",
            source.name(),
            dups.join(", ")
        );
    }
    Ok(n)
}

/// All items of a file (for `bench`).
pub fn read_all(path: &Path) -> Result<Vec<Item>> {
    let src = Source::File(path.to_path_buf());
    let mut r = src.reader(false)?;
    let mut v = Vec::new();
    while let Some(i) = r.next_item()? {
        v.push(i);
    }
    Ok(v)
}
