//! The resource indicator (RFC 8707) must be one string in every request: rmcp sends it as
//! the protected-resource metadata publishes it at authorize, but as its parsed URL in token
//! and refresh requests. A resource whose URL form differs is refused before anything is
//! authorized.

/// A resource indicator that token requests would send differently from the authorization
/// request.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceProblem {
    /// As the authorization request sends it (the protected-resource metadata's `resource`).
    pub published: String,
    /// As token and refresh requests would send it (`None`: it is not a URL at all).
    pub normalized: Option<String>,
}

impl ResourceProblem {
    /// What to tell the operator of connection `name`.
    pub fn explain(&self, name: &str) -> String {
        let published = &self.published;
        let why = match &self.normalized {
            Some(normalized) => format!(
                "token requests would send it normalized as `{normalized}`, and an authorization \
                 server that enforces RFC 8707 refuses a resource that differs from the one \
                 authorized (`invalid_target`)"
            ),
            None => "it is not an absolute URL, as RFC 8707 requires".to_owned(),
        };
        format!(
            "connection `{name}`: its MCP server publishes its resource as `{published}` \
             (protected resource metadata, RFC 9728), but {why}; nothing was authorized. Its \
             operator must publish the resource in canonical URL form{}",
            self.normalized
                .as_ref()
                .map(|normalized| format!(" (`{normalized}`)"))
                .unwrap_or_default()
        )
    }
}

/// Refuses resource indicator `resource` unless parsing it as a URL gives it back unchanged.
pub fn check_resource(resource: &str) -> Result<(), ResourceProblem> {
    match url::Url::parse(resource) {
        Ok(url) if url.as_str() == resource => Ok(()),
        parsed => Err(ResourceProblem {
            published: resource.to_owned(),
            normalized: parsed.ok().map(String::from),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_refused_unless_its_url_form_is_the_same_string() {
        for canonical in [
            "https://mcp.example.com/",
            "https://mcp.example.com/mcp",
            "http://127.0.0.1:8080/mcp?tenant=a",
        ] {
            assert_eq!(check_resource(canonical), Ok(()), "{canonical}");
        }
        for (published, normalized) in [
            ("https://a.example", "https://a.example/"),
            ("https://A.example/mcp", "https://a.example/mcp"),
            ("https://a.example:443/mcp", "https://a.example/mcp"),
        ] {
            assert_eq!(
                check_resource(published),
                Err(ResourceProblem {
                    published: published.to_owned(),
                    normalized: Some(normalized.to_owned()),
                })
            );
        }
        let not_a_url = check_resource("mcp.example.com").unwrap_err();
        assert_eq!(not_a_url.normalized, None);

        let message = check_resource("https://a.example")
            .unwrap_err()
            .explain("remote");
        assert!(message.contains("`https://a.example`"), "{message}");
        assert!(message.contains("`https://a.example/`"), "{message}");
        assert!(message.contains("invalid_target"), "{message}");
    }
}
