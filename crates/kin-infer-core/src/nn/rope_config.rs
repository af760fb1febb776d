//! Reading a decoder's rope parameters from `config.json`, written once for every family: the
//! Hub's spelling (`rope_theta`, `partial_rotary_factor` and a `rope_scaling` dict at top
//! level) and transformers 5.x's (`rope_parameters` holding `rope_type`, `rope_theta`, ...).
//! Which dict a family reads first is the family's choice (transformers differs per model);
//! how a dict's fields are read, and what their errors say, is decided here.

use crate::error::{InferError, Result};
use crate::io::config_fields::ConfigFields;
use serde_json::{Map, Value};

/// The object at `field`, or `None` when absent or `null`; anything else is an error naming
/// the field.
pub fn object<'a>(f: &ConfigFields<'a>, field: &str) -> Result<Option<&'a Map<String, Value>>> {
    match f.get(field) {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(x) => Err(f.err(field, format!("expected an object, found {x}"))),
    }
}

/// One rope dict (`rope_scaling` or `rope_parameters`), possibly absent.
pub struct RopeDict<'f, 'a> {
    f: &'f ConfigFields<'a>,
    /// The field errors name: `rope_scaling` or `rope_parameters`.
    pub field: &'static str,
    pub map: Option<&'a Map<String, Value>>,
}

impl<'f, 'a> RopeDict<'f, 'a> {
    pub fn new(
        f: &'f ConfigFields<'a>,
        field: &'static str,
        map: Option<&'a Map<String, Value>>,
    ) -> Self {
        RopeDict { f, field, map }
    }

    /// `key` of the dict (`null` counts as absent).
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|x| !x.is_null())
    }

    /// An error about `key` of this dict (`rope_scaling.factor: ...`).
    pub fn err(&self, key: &str, reason: impl Into<String>) -> InferError {
        self.f.err(&format!("{}.{key}", self.field), reason)
    }

    /// A number `key` of the dict.
    pub fn num(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)
            .map(|x| {
                x.as_f64()
                    .ok_or_else(|| self.err(key, format!("expected a number, found {x}")))
            })
            .transpose()
    }

    /// A number `key` of the dict, else the top-level `key` (the Hub's spelling).
    pub fn num_or_top(&self, key: &str) -> Result<Option<f64>> {
        match self.num(key)? {
            Some(v) => Ok(Some(v)),
            None => self.f.get(key).map(|_| self.f.f64(key, 0.0)).transpose(),
        }
    }

    /// `rope_type` (or the older `type`), `default` when absent.
    pub fn kind(&self) -> Result<&'a str> {
        match self.get("rope_type").or_else(|| self.get("type")) {
            None => Ok("default"),
            Some(Value::String(t)) => Ok(t.as_str()),
            Some(x) => Err(self.err("rope_type", format!("expected a string, found {x}"))),
        }
    }

    /// The rotary base: the dict's `rope_theta`, else the top-level one, else 10000; it must
    /// exceed 1.
    pub fn theta(&self) -> Result<f64> {
        let t = self.num_or_top("rope_theta")?.unwrap_or(10000.0);
        self.f.positive_f64("rope_theta", t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn with(v: Value, check: impl FnOnce(&ConfigFields)) {
        let f = ConfigFields::new(&v, Path::new("config.json")).unwrap();
        check(&f);
    }

    #[test]
    fn both_spellings_read_alike() {
        // transformers 5.x: everything inside rope_parameters.
        with(
            json!({"rope_parameters": {"rope_type": "linear", "rope_theta": 5e5, "factor": 2}}),
            |f| {
                let d = RopeDict::new(f, "rope_parameters", object(f, "rope_parameters").unwrap());
                assert_eq!(d.kind().unwrap(), "linear");
                assert_eq!(d.theta().unwrap(), 5e5);
                assert_eq!(d.num("factor").unwrap(), Some(2.0));
            },
        );
        // Hub: theta at top level, the dict under rope_scaling with the older `type` key.
        with(
            json!({"rope_theta": 1e6, "rope_scaling": {"type": "dynamic"}}),
            |f| {
                let d = RopeDict::new(f, "rope_scaling", object(f, "rope_scaling").unwrap());
                assert_eq!(d.kind().unwrap(), "dynamic");
                assert_eq!(d.theta().unwrap(), 1e6);
            },
        );
        // Absent or null: default type, theta 10000.
        with(json!({"rope_scaling": null}), |f| {
            let d = RopeDict::new(f, "rope_scaling", object(f, "rope_scaling").unwrap());
            assert_eq!(d.kind().unwrap(), "default");
            assert_eq!(d.theta().unwrap(), 10000.0);
        });
    }

    #[test]
    fn bad_fields_are_named() {
        with(json!({"rope_scaling": 3}), |f| {
            let e = object(f, "rope_scaling").unwrap_err().to_string();
            assert!(
                e.contains("rope_scaling") && e.contains("expected an object"),
                "{e}"
            );
        });
        with(
            json!({"rope_parameters": {"rope_type": 1, "factor": "x", "rope_theta": 0.5}}),
            |f| {
                let d = RopeDict::new(f, "rope_parameters", object(f, "rope_parameters").unwrap());
                let e = d.kind().unwrap_err().to_string();
                assert!(e.contains("rope_parameters.rope_type"), "{e}");
                let e = d.num("factor").unwrap_err().to_string();
                assert!(e.contains("rope_parameters.factor"), "{e}");
                let e = d.theta().unwrap_err().to_string();
                assert!(e.contains("rope_theta"), "{e}");
            },
        );
    }
}
