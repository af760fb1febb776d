//! Chat prompts: the model's chat template (a Jinja template in `chat_template.jinja`, as
//! transformers 5 saves it, `chat_template.json`, or `tokenizer_config.json`) rendered with [`minijinja`] the way transformers renders it
//! (`trim_blocks` and `lstrip_blocks` on; `messages`, `add_generation_prompt`, `bos_token`,
//! `eos_token` and `raise_exception` in scope), then tokenized without adding special tokens
//! again: the template writes them itself.
//!
//! A few Python string and dict methods that chat templates call (`strip`, `startswith`,
//! `items`, ...) are provided through minijinja's unknown-method hook.

use crate::error::{InferError, Result};
use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use std::path::{Path, PathBuf};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// "system", "user" or "assistant" (passed to the template as written).
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A model's chat template with the special tokens it refers to.
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
    path: PathBuf,
}

/// `"<s>"` or `{"content": "<s>", ...}` (an AddedToken) as a string.
fn token_text(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(String::from),
        _ => None,
    }
}

/// The `chat_template` field of `v` (read from `path`): `None` when absent or null; a string;
/// or, from a list of `{"name", "template"}` objects, the one named "default".
fn template_field(v: &serde_json::Value, path: &Path) -> Result<Option<String>> {
    let err = |reason: String| InferError::Config {
        path: path.to_path_buf(),
        field: "chat_template".into(),
        reason,
    };
    match v.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Array(list)) => {
            let named = |want: &str| {
                list.iter().find_map(|t| {
                    (t.get("name")?.as_str()? == want)
                        .then(|| t.get("template")?.as_str().map(String::from))
                        .flatten()
                })
            };
            named("default").map(Some).ok_or_else(|| {
                let names: Vec<&str> = list
                    .iter()
                    .filter_map(|t| t.get("name")?.as_str())
                    .collect();
                err(format!(
                    "a list of templates without one named \"default\" (found: {})",
                    names.join(", ")
                ))
            })
        }
        Some(x) => Err(err(format!(
            "expected a template string or a list of named templates, found {x}"
        ))),
    }
}

impl ChatTemplate {
    /// Reads the model's chat template where transformers looks for it, in its order:
    /// `chat_template.jinja` (the raw template, as transformers 5 saves it), then
    /// `chat_template.json` (`{"chat_template": ...}`, the processor layout), then the
    /// `chat_template` of `tokenizer_config.json` (a string, or a list of `{"name",
    /// "template"}` objects of which the one named "default" is used). `bos_token` and
    /// `eos_token` come from `tokenizer_config.json` when it exists.
    pub fn load(dir: &Path) -> Result<Self> {
        if crate::models::decoders::is_gguf_file(dir) {
            return Self::from_gguf(dir);
        }
        let config_path = dir.join("tokenizer_config.json");
        let config: Option<serde_json::Value> = if config_path.is_file() {
            Some(crate::io::read_json(&config_path)?)
        } else {
            None
        };
        let jinja = dir.join("chat_template.jinja");
        let json = dir.join("chat_template.json");
        let (source, path) = if jinja.is_file() {
            let text = std::fs::read_to_string(&jinja).map_err(|e| InferError::io(&jinja, e))?;
            if text.trim().is_empty() {
                return Err(InferError::Config {
                    path: jinja,
                    field: "chat_template".into(),
                    reason: "the template file is empty".into(),
                });
            }
            (text, jinja)
        } else if json.is_file() {
            let v: serde_json::Value = crate::io::read_json(&json)?;
            match template_field(&v, &json)? {
                Some(s) => (s, json),
                None => {
                    return Err(InferError::Config {
                        path: json,
                        field: "chat_template".into(),
                        reason: "missing".into(),
                    })
                }
            }
        } else {
            let Some(v) = &config else {
                return Err(InferError::Input(format!(
                    "--chat needs a chat template, and none of chat_template.jinja, \
                     chat_template.json or tokenizer_config.json exists in {}",
                    dir.display()
                )));
            };
            match template_field(v, &config_path)? {
                Some(s) => (s, config_path.clone()),
                None => {
                    return Err(InferError::Input(format!(
                        "{} has no chat_template (and there is no chat_template.jinja or \
                         chat_template.json beside it): this model has no chat format (use a \
                         plain prompt)",
                        config_path.display()
                    )))
                }
            }
        };
        let token = |key: &str| token_text(config.as_ref().and_then(|v| v.get(key)));
        Ok(ChatTemplate {
            source,
            bos_token: token("bos_token"),
            eos_token: token("eos_token"),
            path,
        })
    }

    /// A template given directly (for tests and embedders).
    /// A GGUF file's `tokenizer.chat_template`, its BOS and EOS token texts beside it.
    fn from_gguf(path: &Path) -> Result<Self> {
        use crate::io::gguf_tokenizer as gt;
        let gguf = crate::io::gguf::GgufFile::open(path)?;
        let Some(source) = gt::chat_template(&gguf) else {
            return Err(InferError::Input(format!(
                "{} has no chat template (`tokenizer.chat_template`): this model has no chat \
                 format (use a plain prompt)",
                path.display()
            )));
        };
        Ok(ChatTemplate {
            source: source.to_string(),
            bos_token: gt::token_text(&gguf, "tokenizer.ggml.bos_token_id"),
            eos_token: gt::token_text(&gguf, "tokenizer.ggml.eos_token_id"),
            path: path.to_path_buf(),
        })
    }

    pub fn from_source(
        source: impl Into<String>,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Self {
        ChatTemplate {
            source: source.into(),
            bos_token,
            eos_token,
            path: PathBuf::from("<chat_template>"),
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt text for `messages`; with `add_generation_prompt` the template opens the
    /// assistant's turn. A template error, or a `raise_exception(msg)` call, is an
    /// [`InferError::Input`] naming the template's file and the message.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let fail = |e: Error| {
            // `raise_exception` errors carry the template's message as their detail.
            let msg = match (e.kind(), e.detail()) {
                (ErrorKind::InvalidOperation, Some(d)) if d.starts_with("raise_exception: ") => {
                    d["raise_exception: ".len()..].to_string()
                }
                _ => e.to_string(),
            };
            InferError::Input(format!("chat template of {}: {msg}", self.path.display()))
        };
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(fail)?,
        );
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<Value, Error> {
                Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("raise_exception: {msg}"),
                ))
            },
        );
        env.set_unknown_method_callback(py_method);
        let tmpl = env.template_from_str(&self.source).map_err(fail)?;
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| {
                Value::from(std::collections::BTreeMap::from([
                    ("role".to_string(), Value::from(m.role.as_str())),
                    ("content".to_string(), Value::from(m.content.as_str())),
                ]))
            })
            .collect();
        let ctx = minijinja::context! {
            messages => msgs,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.clone().unwrap_or_default(),
            eos_token => self.eos_token.clone().unwrap_or_default(),
        };
        tmpl.render(ctx).map_err(fail)
    }
}

/// The Python methods chat templates use most, on strings and maps.
fn py_method(
    _state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> std::result::Result<Value, Error> {
    let arg_str = |i: usize| -> std::result::Result<Option<&str>, Error> {
        match args.get(i) {
            None => Ok(None),
            Some(a) if a.is_none() => Ok(None),
            Some(a) => a.as_str().map(Some).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{method}: expected a string argument"),
                )
            }),
        }
    };
    if let Some(s) = value.as_str() {
        let chars = arg_str(0)?;
        let trim_set = |c: char| chars.map_or(c.is_whitespace(), |set| set.contains(c));
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(trim_set)),
            "lstrip" => Value::from(s.trim_start_matches(trim_set)),
            "rstrip" => Value::from(s.trim_end_matches(trim_set)),
            "startswith" => Value::from(chars.is_some_and(|p| s.starts_with(p))),
            "endswith" => Value::from(chars.is_some_and(|p| s.ends_with(p))),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "replace" => match (arg_str(0)?, arg_str(1)?) {
                (Some(a), Some(b)) => Value::from(s.replace(a, b)),
                _ => return Err(Error::from(ErrorKind::MissingArgument)),
            },
            "split" => match chars {
                Some(sep) => Value::from(s.split(sep).map(Value::from).collect::<Vec<_>>()),
                None => Value::from(s.split_whitespace().map(Value::from).collect::<Vec<_>>()),
            },
            _ => return Err(Error::from(ErrorKind::UnknownMethod)),
        });
    }
    if value.kind() == ValueKind::Map {
        return match method {
            "items" => Ok(Value::from(
                value
                    .try_iter()?
                    .map(|k| {
                        let v = value.get_item(&k).unwrap_or_default();
                        Value::from(vec![k, v])
                    })
                    .collect::<Vec<_>>(),
            )),
            "keys" => Ok(Value::from(value.try_iter()?.collect::<Vec<_>>())),
            "values" => Ok(Value::from(
                value
                    .try_iter()?
                    .map(|k| value.get_item(&k).unwrap_or_default())
                    .collect::<Vec<_>>(),
            )),
            "get" => {
                let key = args.first().cloned().unwrap_or_default();
                let v = value.get_item(&key).unwrap_or_default();
                Ok(if v.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    v
                })
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        };
    }
    Err(Error::from(ErrorKind::UnknownMethod))
}

/// Token ids of an already rendered chat prompt: the model's tokenizer (`dir/tokenizer.json`,
/// or a GGUF file's) without adding special tokens (the template wrote BOS and the turn
/// markers itself).
pub fn encode_rendered(dir: &Path, text: &str) -> Result<Vec<u32>> {
    super::stream::GenTokenizer::load(dir)?.encode_with(text, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

    #[test]
    fn chatml_renders_with_generation_prompt() {
        let t = ChatTemplate::from_source(CHATML, None, None);
        let msgs = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "hi "),
        ];
        assert_eq!(
            t.render(&msgs, true).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn raise_exception_and_python_methods() {
        let src = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}{{ bos_token }}[INST] {{ messages[0]['content'].strip() }} [/INST]{{ 'x'.upper() if messages[0]['content'].startswith(' a') }}";
        let t = ChatTemplate::from_source(src, Some("<s>".into()), Some("</s>".into()));
        assert_eq!(
            t.render(&[ChatMessage::new("user", " a b ")], true)
                .unwrap(),
            "<s>[INST] a b [/INST]X"
        );
        let e = t
            .render(&[ChatMessage::new("assistant", "x")], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Conversation must start with user"), "{e}");
    }
}
