//! `--model PROVIDER:MODEL`: which OpenAI-compatible endpoint ([`Preset`]), which key variable.

use as_model::SharedChatModel;
use as_model_openai::{ApiKey, OpenAiCompatibleConfig, OpenAiCompatibleModel, Preset};

use crate::exit::{CliError, CliResult, ExitKind};

/// A supported provider: the presets of `as-model-openai`.
pub(crate) type Provider = Preset;

/// A parsed `--model` with its resolved endpoint and key.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ModelSpec {
    /// The provider.
    pub(crate) provider: Provider,
    /// The model name.
    pub(crate) model: String,
    /// The endpoint.
    pub(crate) base_url: String,
    /// The key (`None` for keyless providers).
    pub(crate) api_key: Option<String>,
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSpec")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &masked_endpoint(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Parses `--model` and resolves the endpoint and key from `--base-url` and the environment
/// (read through `env`, so tests need not touch the process environment).
pub(crate) fn resolve(
    model: &str,
    base_url: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> CliResult<ModelSpec> {
    let usage = |m: String| CliError::new(ExitKind::Usage, m);
    let Some((prefix, name)) = model.split_once(':') else {
        return Err(usage(format!(
            "--model {model:?} names no provider: write PROVIDER:MODEL, e.g. openai:gpt-4o-mini or ollama:qwen2.5"
        )));
    };
    let provider = match prefix.to_ascii_lowercase().as_str() {
        "openai" => Preset::OpenAi,
        "dashscope" => Preset::DashScope,
        "deepseek" => Preset::DeepSeek,
        "ollama" => Preset::Ollama,
        other => {
            return Err(usage(format!(
                "unknown model provider {other:?}: use openai:, dashscope:, deepseek: or ollama: (any of them with \
                 --base-url for another OpenAI-compatible server)"
            )));
        }
    };
    if name.trim().is_empty() {
        return Err(usage(format!("--model {model:?} names no model after {prefix}:")));
    }
    let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let base_url = base_url
        .map(str::to_owned)
        .or_else(|| nonempty(env(provider.base_url_var())))
        .unwrap_or_else(|| provider.default_base_url().to_owned());
    // Checked here, before a session is opened or created for a turn that could never run.
    let endpoint_ok = url::Url::parse(&base_url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
    if !endpoint_ok {
        return Err(usage(format!(
            "the model endpoint {:?} (--base-url or {}) is not an http(s) URL, e.g. http://localhost:11434/v1",
            masked_endpoint(&base_url),
            provider.base_url_var()
        )));
    }
    let api_key = match provider.key_var() {
        None => None,
        Some(var) => match nonempty(env(var)) {
            Some(k) => Some(k),
            // A custom endpoint (a local server) may need no key.
            None if base_url != provider.default_base_url() => None,
            None => {
                return Err(usage(format!(
                    "{var} is not set: export {var}=<your {} key> (or pick another provider with --model)",
                    provider.provider()
                )));
            }
        },
    };
    Ok(ModelSpec { provider, model: name.to_owned(), base_url, api_key })
}

/// An endpoint as a message may show it: what may be a credential becomes `***`, as
/// `as-model-openai` masks URLs: the user name and password (everything before the last `@`, which
/// may itself hold `/`, `?` or `#`), each query value (names are kept: `?api-version=***&key=***`;
/// a part without `=` is all value) and a fragment. Works on the text, so an endpoint that is not a
/// valid URL (`localhost:8080/v1?key=…`, no scheme) is masked too.
pub(crate) fn masked_endpoint(text: &str) -> String {
    let text = text.trim();
    // A scheme only when what precedes `://` looks like one (not `://` inside a query value).
    let (scheme, rest) = match text.split_once("://") {
        Some((s, rest)) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) => {
            (&text[..s.len() + 3], rest)
        }
        _ => ("", text),
    };
    let rest = match rest.rfind('@') {
        Some(at) => format!("***{}", &rest[at..]),
        None => rest.to_owned(),
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, _)) => (r, "#***"),
        None => (rest.as_str(), ""),
    };
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => {
            let parts: Vec<String> = query
                .split('&')
                .map(|part| match part.split_once('=') {
                    Some((name, _)) => format!("{name}=***"),
                    None => "***".to_owned(),
                })
                .collect();
            (path, format!("?{}", parts.join("&")))
        }
        None => (rest, String::new()),
    };
    format!("{scheme}{path}{query}{fragment}")
}

/// Builds the model.
pub(crate) fn build(spec: &ModelSpec) -> CliResult<SharedChatModel> {
    let mut config =
        OpenAiCompatibleConfig::preset(spec.provider, spec.model.as_str()).with_base_url(spec.base_url.as_str());
    if let Some(k) = &spec.api_key {
        config = config.with_api_key(ApiKey::new(k.as_str()));
    }
    let model = OpenAiCompatibleModel::new(config)
        .map_err(|e| CliError::new(ExitKind::Usage, format!("cannot set up the model: {e}")))?;
    Ok(std::sync::Arc::new(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn a_base_url_that_is_not_http_is_a_usage_error() {
        for bad in ["not a url", "ftp://h/v1", "http://", "localhost:11434/v1"] {
            let e = resolve("openai:gpt-4o", Some(bad), &|_| Some("k".into())).unwrap_err();
            assert_eq!(e.kind(), ExitKind::Usage, "{bad}");
        }
        let e = resolve("openai:gpt-4o", Some("x://user:pw@h"), &|_| Some("k".into())).unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
        assert!(resolve("openai:gpt-4o", Some("https://h.example/v1"), &|_| Some("k".into())).is_ok());
    }

    /// A rejected endpoint is echoed with its credentials masked: the user name and password, every
    /// query value and a fragment, whether it came from --base-url or from the provider's variable.
    #[test]
    fn a_rejected_endpoint_is_shown_without_its_credentials() {
        for (base_url, var, shown) in [
            ("localhost:8080/v1?key=sk-SECRET", None, "localhost:8080/v1?key=***"),
            ("localhost:8080/v1?api-version=1&key=sk-SECRET", None, "localhost:8080/v1?api-version=***&key=***"),
            ("localhost:8080/v1?sk-SECRET", None, "localhost:8080/v1?***"),
            ("localhost:8080/v1#sk-SECRET", None, "localhost:8080/v1#***"),
            ("user:sk-SECRET@localhost:8080/v1", None, "***@localhost:8080/v1"),
            ("ftp://u:sk-SECRET@h/v1?token=sk-SECRET", None, "ftp://***@h/v1?token=***"),
            ("http://u:sk?SECRET@h/v1", None, "http://***@h/v1"),
            ("ftp://h/v1?key=sk-SECRET", None, "ftp://h/v1?key=***"),
            ("localhost:8080/v1?key=sk-SECRET", Some("OPENAI_BASE_URL"), "localhost:8080/v1?key=***"),
            ("localhost:11434/v1", None, "localhost:11434/v1"),
        ] {
            let env = |k: &str| match (k, var) {
                ("OPENAI_API_KEY", _) => Some("k".to_owned()),
                (k, Some(v)) if k == v => Some(base_url.to_owned()),
                _ => None,
            };
            let flag = if var.is_some() { None } else { Some(base_url) };
            let e = resolve("openai:m", flag, &env).unwrap_err();
            assert_eq!(e.kind(), ExitKind::Usage, "{base_url}");
            let msg = e.to_string();
            assert!(!msg.contains("SECRET"), "{base_url}: {msg}");
            assert!(msg.contains(&format!("endpoint {shown:?} ")), "{base_url}: {msg}");
        }
        // An accepted one is masked in the spec's Debug output too.
        let s = resolve("openai:m", Some("http://u:pw@h/v1?key=sk-SECRET"), &|_| None).unwrap();
        assert!(format!("{s:?}").contains("http://***@h/v1?key=***"), "{s:?}");
    }

    #[test]
    fn providers_resolve_keys_and_endpoints() {
        let env = env_of(&[("OPENAI_API_KEY", "sk-1"), ("DEEPSEEK_API_KEY", "dk")]);
        let s = resolve("openai:gpt-4o-mini", None, &env).unwrap();
        assert_eq!((s.provider, s.model.as_str(), s.api_key.as_deref()), (Preset::OpenAi, "gpt-4o-mini", Some("sk-1")));
        assert_eq!(s.base_url, "https://api.openai.com/v1");
        let s = resolve("deepseek:deepseek-chat", None, &env).unwrap();
        assert_eq!(s.base_url, "https://api.deepseek.com");
        let s = resolve("ollama:qwen2.5:7b", None, &env).unwrap();
        assert_eq!((s.model.as_str(), s.api_key), ("qwen2.5:7b", None));
        let s = resolve("openai:m", Some("http://127.0.0.1:9/v1"), &env_of(&[])).unwrap();
        assert_eq!((s.base_url.as_str(), s.api_key), ("http://127.0.0.1:9/v1", None));
        let s =
            resolve("openai:m", None, &env_of(&[("OPENAI_BASE_URL", "http://h/v1"), ("OPENAI_API_KEY", "k")])).unwrap();
        assert_eq!(s.base_url, "http://h/v1");
        assert!(!format!("{s:?}").contains("\"k\""), "the key is redacted");
    }

    #[test]
    fn missing_key_names_the_variable() {
        let e = resolve("dashscope:qwen-plus", None, &env_of(&[])).unwrap_err();
        assert_eq!(e.kind(), ExitKind::Usage);
        assert!(e.to_string().starts_with("DASHSCOPE_API_KEY is not set: export DASHSCOPE_API_KEY="), "{e}");
        let e = resolve("openai:x", None, &env_of(&[("OPENAI_API_KEY", "  ")])).unwrap_err();
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        for (spec, want) in
            [("gpt-4o", "names no provider"), ("acme:x", "unknown model provider"), ("openai:", "no model")]
        {
            let e = resolve(spec, None, &env_of(&[("OPENAI_API_KEY", "k")])).unwrap_err();
            assert_eq!(e.kind(), ExitKind::Usage);
            assert!(e.to_string().contains(want), "{spec}: {e}");
        }
    }
}
