//! `kin-infer generate`: a prompt (text, a file, or token ids) through a decoder, the output
//! streamed to stdout token by token (flushed each time). Plain output is the generated text
//! (token ids, space-separated, when the model has no tokenizer.json); `--json` prints one
//! object per token, then a summary with the ids, the text, prefill and decode tokens/s and
//! the stop reason. Timing and the stop reason of a plain run go to stderr. `--chat` wraps the
//! prompt text as a user message (after `--system TEXT` when given) and renders the
//! tokenizer's `chat_template` around it (`kin_infer::generate::chat`).

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use kin_infer::generate::chat::{encode_rendered, ChatMessage, ChatTemplate};
use kin_infer::generate::{
    eos_token_ids, generate, Detokenize, GenTokenizer, SamplingParams, TokenEvent,
};
use serde_json::json;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["prompt", "prompt_file", "prompt_ids"])))]
pub struct GenerateArgs {
    /// A model directory, a .gguf file, a catalogue name installed by
    /// scripts/fetch-model.sh, or a Hugging Face repo id in the local cache (docs/models.md).
    #[arg(long)]
    model: String,
    /// Fetch a --model repo id missing from the local Hugging Face cache from the Hub
    /// (HF_ENDPOINT; needs a build with the `download` feature).
    #[arg(long)]
    download: bool,
    /// Prompt text (needs the model's tokenizer.json; special tokens such as BOS are added).
    #[arg(long)]
    prompt: Option<String>,
    /// Read the prompt text from a file (one trailing newline is dropped).
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// Prompt as token ids, separated by spaces or commas, e.g. "1 2 3" (used as given).
    #[arg(long)]
    prompt_ids: Option<String>,
    /// Tokens to generate at most (fewer if the context fills up first; default 256, or the
    /// model's context if smaller). More than the model's context is an error.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Sampling temperature; 0 (the default) is greedy decoding.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep only the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches P (1: all).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep tokens at least P times as likely as the most likely one (0: all).
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Repetition penalty on tokens already in the context (1: none).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Subtracted from a token's logit per occurrence in the context (0: none).
    #[arg(long, default_value_t = 0.0)]
    frequency_penalty: f32,
    /// Subtracted from the logit of every token present in the context (0: none).
    #[arg(long, default_value_t = 0.0)]
    presence_penalty: f32,
    /// Seed of the sampler: the same seed gives the same tokens on every machine.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop when the generated text contains STR (repeatable; the text ends before it).
    #[arg(long = "stop", value_name = "STR")]
    stop: Vec<String>,
    /// Worker threads (default: KIN_INFER_THREADS, else all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Activation numerics: q8 (8-bit activations for ggml-quantized weights, on the CPU),
    /// f32, or auto (the faster on this build: f32 for now); default KIN_INFER_ACTIVATIONS,
    /// else auto (docs/numerics.md).
    #[arg(long, value_name = "MODE", value_parser = crate::model_args::parse_activations)]
    activations: Option<kin_infer::Activations>,
    /// One JSON object per token, then a summary.
    #[arg(long)]
    json: bool,
    /// Send the prompt text as a user message through the tokenizer's chat template
    /// (`chat_template` in tokenizer_config.json), opening the assistant's turn.
    #[arg(long, conflicts_with = "prompt_ids")]
    chat: bool,
    /// With --chat: a system message before the user's.
    #[arg(long, requires = "chat")]
    system: Option<String>,
}

/// Parses "1 2 3" / "1,2,3".
fn parse_ids(s: &str) -> Result<Vec<u32>> {
    let ids = s
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<u32>()
                .map_err(|_| anyhow::anyhow!("--prompt-ids: `{t}` is not a token id"))
        })
        .collect::<Result<Vec<u32>>>()?;
    if ids.is_empty() {
        bail!("--prompt-ids: no token ids given");
    }
    Ok(ids)
}

/// `--max-tokens` when not given (capped at the model's context).
const DEFAULT_MAX_TOKENS: usize = 256;

pub fn run(a: GenerateArgs) -> Result<u8> {
    let dir = crate::model_args::resolve(&a.model, a.download)?;
    let gen = crate::progress::loading(&a.model, || {
        kin_infer::Generator::load(
            &dir,
            &kin_infer::GeneratorOptions {
                threads: a.threads,
                activations: a.activations,
                ..Default::default()
            },
        )
    })?;
    let spec = gen.spec();

    let has_tokenizer = kin_infer::generate::has_tokenizer(&dir);
    let text_prompt = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(f)) => {
            let t = std::fs::read_to_string(f)
                .with_context(|| format!("--prompt-file {}", f.display()))?;
            let t = t
                .strip_suffix("\r\n")
                .or_else(|| t.strip_suffix('\n'))
                .unwrap_or(&t);
            Some(t.to_string())
        }
        (None, None) => None,
    };
    let tokenizer = if has_tokenizer || text_prompt.is_some() || !a.stop.is_empty() {
        Some(GenTokenizer::load(&dir).with_context(|| {
            if text_prompt.is_some() {
                "a text prompt needs the model's tokenizer (use --prompt-ids without one)"
            } else if !has_tokenizer {
                "--stop needs the model's tokenizer to decode the generated text"
            } else {
                "loading the tokenizer"
            }
        })?)
    } else {
        None
    };
    let prompt = match (&text_prompt, &a.prompt_ids) {
        (Some(t), _) if a.chat => {
            let template = ChatTemplate::load(&dir)?;
            let mut messages = Vec::with_capacity(2);
            if let Some(sys) = &a.system {
                messages.push(ChatMessage::new("system", sys.as_str()));
            }
            messages.push(ChatMessage::new("user", t.as_str()));
            let rendered = template.render(&messages, true)?;
            encode_rendered(&dir, &rendered)?
        }
        (Some(t), _) => tokenizer.as_ref().expect("loaded above").encode(t)?,
        (None, Some(s)) => parse_ids(s)?,
        (None, None) => unreachable!("clap requires one prompt"),
    };
    if prompt.is_empty() {
        bail!("the prompt has no tokens");
    }
    let params = SamplingParams {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        repetition_penalty: a.repeat_penalty,
        frequency_penalty: a.frequency_penalty,
        presence_penalty: a.presence_penalty,
        seed: a.seed,
        max_new_tokens: a
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS.min(spec.max_sequence_length)),
        stop: a.stop.clone(),
        eos_token_ids: eos_token_ids(&dir, spec)?,
    };

    let has_text = tokenizer.is_some();
    let json = a.json;
    let mut write_err: Option<std::io::Error> = None;
    let result = gen.install(|| {
        let detok = tokenizer.as_ref().map(|t| t as &dyn Detokenize);
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut on_token = |e: &TokenEvent| {
            let r = if json {
                let mut obj = json!({"event": "token", "index": e.index, "id": e.id});
                if has_text {
                    obj["text"] = json!(e.text);
                }
                writeln!(out, "{obj}")
            } else if has_text {
                write!(out, "{}", e.text)
            } else if e.index == 0 {
                write!(out, "{}", e.id)
            } else {
                write!(out, " {}", e.id)
            };
            match r.and_then(|_| out.flush()) {
                Ok(()) => ControlFlow::Continue(()),
                Err(err) => {
                    write_err = Some(err);
                    ControlFlow::Break(())
                }
            }
        };
        generate(
            gen.decoder(),
            gen.backend(),
            &prompt,
            &params,
            detok,
            &mut on_token,
        )
    });
    let g = result?;
    if let Some(e) = write_err {
        return Err(e).context("writing to stdout");
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        let summary = json!({
            "event": "summary",
            "prompt_tokens": g.prompt_tokens,
            "generated_tokens": g.tokens.len(),
            "ids": g.tokens,
            "text": g.text,
            "prefill_tokens_per_s": g.prefill_tokens_per_s(),
            "decode_tokens_per_s": g.decode_tokens_per_s(),
            "stop_reason": g.stop_reason.as_str(),
        });
        writeln!(out, "{summary}")?;
    } else {
        writeln!(out)?;
        eprintln!(
            "{} prompt tokens, {} generated; prefill {:.1} tokens/s, decode {:.1} tokens/s; \
             stop: {}",
            g.prompt_tokens,
            g.tokens.len(),
            g.prefill_tokens_per_s(),
            g.decode_tokens_per_s(),
            g.stop_reason.as_str()
        );
    }
    out.flush()?;
    Ok(0)
}
