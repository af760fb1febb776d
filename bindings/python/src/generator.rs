//! `kin_infer.Generator`'s native half: a loaded decoder with its tokenizer and chat template,
//! whole generations (`generate`) and token-by-token ones (`Stream`, a Python iterator that
//! steps a `kin_infer::generate::Stepper`: the same tokens as `generate`).

use crate::{invalid, py_err};
use kin_infer::generate::chat::{ChatMessage, ChatTemplate};
use kin_infer::generate::{
    eos_token_ids, has_tokenizer, Detokenize, GenTokenizer, Generation, SamplingParams, Stepper,
};
use kin_infer::io::hub;
use kin_infer::models::decoders::BatchScratch;
use kin_infer::GeneratorOptions;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ops::ControlFlow;
use std::sync::Arc;

#[pyclass(frozen, module = "kin_infer._native")]
pub struct Generator {
    inner: Arc<kin_infer::Generator>,
    tokenizer: Option<Arc<GenTokenizer>>,
    template: Option<ChatTemplate>,
    eos: Vec<u32>,
}

/// Sampling settings as the Python side passes them (keyword arguments).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Sampling {
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    frequency_penalty: f32,
    presence_penalty: f32,
    seed: u64,
    stop: Vec<String>,
}

impl Generator {
    fn params(&self, s: Sampling) -> PyResult<SamplingParams> {
        let p = SamplingParams {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repetition_penalty: s.repetition_penalty,
            frequency_penalty: s.frequency_penalty,
            presence_penalty: s.presence_penalty,
            seed: s.seed,
            max_new_tokens: s.max_tokens,
            stop: s.stop,
            eos_token_ids: self.eos.clone(),
        };
        p.validate().map_err(py_err)?;
        Ok(p)
    }

    fn tok(&self, what: &str) -> PyResult<&Arc<GenTokenizer>> {
        self.tokenizer.as_ref().ok_or_else(|| {
            invalid(format!(
                "{what} needs the model's tokenizer, and {} has none (pass token ids instead)",
                self.inner.dir().display()
            ))
        })
    }
}

fn summary<'py>(py: Python<'py>, g: &Generation) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("token_ids", g.tokens.clone())?;
    d.set_item("text", g.text.clone())?;
    d.set_item("stop_reason", g.stop_reason.as_str())?;
    d.set_item("prompt_tokens", g.prompt_tokens)?;
    d.set_item("prefill_tokens_per_s", g.prefill_tokens_per_s())?;
    d.set_item("decode_tokens_per_s", g.decode_tokens_per_s())?;
    Ok(d)
}

#[pymethods]
impl Generator {
    #[new]
    #[pyo3(signature = (path, threads=None, activations=None))]
    fn new(
        py: Python<'_>,
        path: &str,
        threads: Option<usize>,
        activations: Option<&str>,
    ) -> PyResult<Self> {
        let path = path.to_string();
        let activations = activations.map(crate::parse_activations).transpose()?;
        py.detach(|| -> kin_infer::Result<Generator> {
            let dir = hub::resolve_model(&path)?;
            let inner = kin_infer::Generator::load(
                &dir,
                &GeneratorOptions {
                    threads,
                    activations,
                    ..Default::default()
                },
            )?;
            let tokenizer = if has_tokenizer(&dir) {
                Some(Arc::new(GenTokenizer::load(&dir)?))
            } else {
                None
            };
            // Without a template the model still completes text; chat then says why not.
            let template = ChatTemplate::load(&dir).ok();
            let eos = eos_token_ids(&dir, inner.spec())?;
            Ok(Generator {
                inner: Arc::new(inner),
                tokenizer,
                template,
                eos,
            })
        })
        .map_err(py_err)
    }

    /// Token ids of `text` as a prompt (the tokenizer's special tokens added, e.g. BOS).
    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        let t = self.tok("a text prompt")?;
        py.detach(|| t.encode(text)).map_err(py_err)
    }

    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        let t = self.tok("decoding")?;
        py.detach(|| t.decode(&ids)).map_err(py_err)
    }

    /// Renders `messages` ((role, content) pairs) through the model's chat template, with
    /// the assistant's turn opened, and returns the prompt's token ids.
    fn encode_chat(&self, py: Python<'_>, messages: Vec<(String, String)>) -> PyResult<Vec<u32>> {
        let t = self.tok("a chat")?;
        let template = self.template.as_ref().ok_or_else(|| {
            invalid(format!(
                "{} has no chat template (chat_template.jinja, chat_template.json or \
                 tokenizer_config.json); pass a text prompt instead",
                self.inner.dir().display()
            ))
        })?;
        let msgs: Vec<ChatMessage> = messages
            .into_iter()
            .map(|(r, c)| ChatMessage::new(r, c))
            .collect();
        py.detach(|| {
            let rendered = template.render(&msgs, true)?;
            t.encode_with(&rendered, false)
        })
        .map_err(py_err)
    }

    /// A whole generation after `prompt` (token ids); a dict of ids, text, stop reason and
    /// rates.
    fn generate<'py>(
        &self,
        py: Python<'py>,
        prompt: Vec<u32>,
        sampling: Sampling,
    ) -> PyResult<Bound<'py, PyDict>> {
        let params = self.params(sampling)?;
        let tok = self.tokenizer.clone();
        let g = py
            .detach(|| {
                let detok = tok.as_deref().map(|t| t as &(dyn Detokenize + Sync));
                self.inner
                    .generate(&prompt, &params, detok, |_| ControlFlow::Continue(()))
            })
            .map_err(py_err)?;
        summary(py, &g)
    }

    /// A generation to be stepped token by token (prefilled when the first token is asked
    /// for).
    fn stream(&self, prompt: Vec<u32>, sampling: Sampling) -> PyResult<Stream> {
        let params = self.params(sampling)?;
        Ok(Stream {
            gen: self.inner.clone(),
            tokenizer: self.tokenizer.clone(),
            state: Some(StreamState::Pending { prompt, params }),
            scratch: BatchScratch::default(),
            result: None,
        })
    }

    #[getter]
    fn context_length(&self) -> usize {
        self.inner.spec().max_sequence_length
    }
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.spec().vocab_size
    }
    #[getter]
    fn family(&self) -> String {
        self.inner.spec().model_type.clone()
    }
    /// The activation numerics it runs: `q8` or `f32`.
    #[getter]
    fn activations(&self) -> &'static str {
        self.inner.numerics().name()
    }
    /// The numerics version its logits are pinned to.
    #[getter]
    fn numerics_version(&self) -> &'static str {
        self.inner.numerics().version()
    }
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.eos.clone()
    }
    #[getter]
    fn has_tokenizer(&self) -> bool {
        self.tokenizer.is_some()
    }
    #[getter]
    fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }
    #[getter]
    fn threads(&self) -> usize {
        self.inner.threads()
    }
    #[getter]
    fn path(&self) -> String {
        self.inner.dir().display().to_string()
    }
}

enum StreamState {
    /// Not started: prefill happens on the first `__next__`.
    Pending {
        prompt: Vec<u32>,
        params: SamplingParams,
    },
    /// Running; `decode` says whether the next token must be computed before it is emitted.
    Running { st: Box<Stepper>, decode: bool },
}

/// One generation, as a Python iterator of `(token_id, text)` pairs (text: what the token
/// completes; empty while a stop string may be forming or a character is split).
#[pyclass(module = "kin_infer._native")]
pub struct Stream {
    gen: Arc<kin_infer::Generator>,
    tokenizer: Option<Arc<GenTokenizer>>,
    state: Option<StreamState>,
    scratch: BatchScratch,
    result: Option<Generation>,
}

impl Stream {
    /// The next token, or None once the generation has stopped.
    fn step(&mut self) -> kin_infer::Result<Option<(u32, String)>> {
        let g = &*self.gen;
        let mut st = match self.state.take() {
            None => return Ok(None),
            Some(StreamState::Pending { prompt, params }) => {
                Box::new(g.start(&prompt, &params, self.tokenizer.is_some())?)
            }
            Some(StreamState::Running { mut st, decode }) => {
                if decode {
                    g.decode_step(&mut [&mut *st], &mut self.scratch)?;
                }
                st
            }
        };
        let mut out = None;
        let detok = self.tokenizer.as_deref().map(|t| t as &dyn Detokenize);
        let stop = st.emit(detok, |e| {
            out = Some((e.id, e.text.to_string()));
            ControlFlow::Continue(())
        })?;
        if stop.is_some() {
            self.result = Some(st.finish());
        } else {
            self.state = Some(StreamState::Running { st, decode: true });
        }
        Ok(out)
    }
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<(u32, String)>> {
        py.detach(|| self.step()).map_err(py_err)
    }

    /// The finished generation's summary (None until the iterator is exhausted).
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.result.as_ref().map(|g| summary(py, g)).transpose()
    }

    /// Stops the generation early (its summary says "cancelled").
    fn close(&mut self) {
        if let Some(StreamState::Running { st, .. }) = self.state.take() {
            let mut g = st.finish();
            g.stop_reason = kin_infer::generate::StopReason::Cancelled;
            self.result = Some(g);
        }
    }
}
