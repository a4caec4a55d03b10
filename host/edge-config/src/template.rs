//! Spin's variable templates: literal text with `{{ name }}` references,
//! rendered within a bound.
//!
//! A template a few bytes long can name a value of 64 KiB many times:
//! `"{{a}}"` a million times over renders to 64 GiB. Rendering stops at
//! [`MAX_RENDERED_BYTES`] (or the caller's bound) before it grows past it.
//!
//! ```
//! let value = |name: &str| match name {
//!     "host" => Ok("example.com"),
//!     _ => Err(format!("{name:?} is not set")),
//! };
//! let url = edge_config::template::render("https://{{ host }}/", 1024, value);
//! assert_eq!(url.unwrap(), "https://example.com/");
//! ```

/// Bytes one rendered template may take: a variable's value, or an
/// outbound rule.
pub const MAX_RENDERED_BYTES: usize = 1 << 20;

/// The names `template` refers to, in order, or why it is malformed.
pub fn references(template: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some((_, name, after)) = next_reference(template, rest)? {
        names.push(name);
        rest = after;
    }
    Ok(names)
}

/// `template` with each `{{ name }}` replaced by `value(name)` (whose
/// error is the render's), or why not: malformed, or more than `max` bytes
/// rendered.
pub fn render<'v>(
    template: &str,
    max: usize,
    mut value: impl FnMut(&str) -> Result<&'v str, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len().min(max));
    let mut rest = template;
    let push = |out: &mut String, text: &str| {
        if out.len() + text.len() > max {
            return Err(format!(
                "a template of {} bytes renders to more than {max} bytes",
                template.len()
            ));
        }
        out.push_str(text);
        Ok(())
    };
    while let Some((before, name, after)) = next_reference(template, rest)? {
        push(&mut out, before)?;
        push(&mut out, value(name)?)?;
        rest = after;
    }
    push(&mut out, rest)?;
    Ok(out)
}

/// The text before the next reference in `rest`, the name it refers to
/// (trimmed) and the text after it; `None` if there is none.
fn next_reference<'t>(
    template: &str,
    rest: &'t str,
) -> Result<Option<(&'t str, &'t str, &'t str)>, String> {
    let Some(start) = rest.find("{{") else {
        return Ok(None);
    };
    let after = &rest[start + 2..];
    let end = after
        .find("}}")
        .ok_or_else(|| format!("unclosed '{{{{' in template {template:?}"))?;
    Ok(Some((
        &rest[..start],
        after[..end].trim(),
        &after[end + 2..],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str) -> Result<&'static str, String> {
        match name {
            "a" => Ok("1"),
            _ => Err(format!("{name:?} has no value")),
        }
    }

    #[test]
    fn references_are_replaced_and_failures_said() {
        assert_eq!(render("x{{ a }}y{{a}}", 100, one).unwrap(), "x1y1");
        assert_eq!(render("no references", 100, one).unwrap(), "no references");
        assert_eq!(
            render("{{ b }}", 100, one).unwrap_err(),
            "\"b\" has no value"
        );
        assert!(render("{{ a", 100, one).unwrap_err().contains("unclosed"));
        assert_eq!(references("{{a}}-{{ b }}").unwrap(), ["a", "b"]);
        assert!(references("{{a").is_err());
    }

    #[test]
    fn rendering_stops_at_its_bound() {
        let value = "v".repeat(64 << 10);
        let template = "{{a}}".repeat(1 << 20);
        let rendered = render(&template, MAX_RENDERED_BYTES, |_| Ok(&value));
        assert_eq!(
            rendered.unwrap_err(),
            format!("a template of 5242880 bytes renders to more than {MAX_RENDERED_BYTES} bytes")
        );
        let exactly = "{{a}}".repeat(16);
        assert_eq!(
            render(&exactly, MAX_RENDERED_BYTES, |_| Ok(&value))
                .unwrap()
                .len(),
            MAX_RENDERED_BYTES
        );
        assert!(render("x", 0, one).is_err());
    }
}
