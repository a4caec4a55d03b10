//! App variables: Spin's templates (`"{{ api_key }}"` in a component's
//! variables) rendered from what is set through the API, else the
//! version's declared default.

use crate::model::{VariableDecl, VersionSpec};
use std::collections::BTreeMap;

/// Whether `name` is a variable name (Spin's rule, as edge-config checks
/// it) that fits the database's column.
pub fn is_name(name: &str) -> bool {
    name.len() <= 63 && edge_config::check_variable_name(name).is_ok()
}

/// Bytes a version's rendered variables and outbound rules may take in
/// all: what every node is sent and keeps (one template is bounded by
/// [`edge_config::template::MAX_RENDERED_BYTES`], but a version may have
/// thousands).
pub const MAX_SPEC_RENDERED_BYTES: usize = 16 << 20;

/// The variable names `template` refers to, or why it is malformed.
pub fn references(template: &str) -> Result<Vec<&str>, String> {
    let names = edge_config::template::references(template)?;
    match names.iter().find(|name| !is_name(name)) {
        Some(name) => Err(format!("{template:?}: {name:?} is not a variable name")),
        None => Ok(names),
    }
}

/// `template` with every `{{ name }}` replaced by its value.
pub fn render(
    template: &str,
    set: &BTreeMap<String, String>,
    declared: &BTreeMap<String, VariableDecl>,
) -> Result<String, String> {
    use edge_config::template::MAX_RENDERED_BYTES;
    edge_config::template::render(template, MAX_RENDERED_BYTES, |name| {
        set.get(name)
            .or_else(|| declared.get(name).and_then(|d| d.default.as_ref()))
            .map(String::as_str)
            .ok_or_else(|| {
                if declared.contains_key(name) {
                    format!("variable {name:?} has no value (set it: PUT .../variables/{name})")
                } else {
                    format!("variable {name:?} is not declared in the version's variables")
                }
            })
    })
}

/// Renders every component variable and templated outbound rule of
/// `spec` in place; the first failure as `(component, variable or
/// `allowed_outbound_hosts[i]`, why)`. Required variables must have a
/// value even if no template uses them.
pub fn render_spec(
    spec: &mut VersionSpec,
    set: &BTreeMap<String, String>,
) -> Result<(), (String, String, String)> {
    for (name, decl) in &spec.variables {
        if decl.required && !set.contains_key(name) && decl.default.is_none() {
            return Err((
                String::new(),
                name.clone(),
                format!(
                    "required variable {name:?} has no value (set it: PUT .../variables/{name})"
                ),
            ));
        }
    }
    let declared = spec.variables.clone();
    let mut total = 0usize;
    let mut count = |id: &str, field: &str, rendered: &str| {
        total += rendered.len();
        if total > MAX_SPEC_RENDERED_BYTES {
            return Err((
                id.to_string(),
                field.to_string(),
                format!(
                    "the version's variables and outbound rules render to more than {MAX_SPEC_RENDERED_BYTES} bytes in all"
                ),
            ));
        }
        Ok(())
    };
    for (id, c) in spec.components.iter_mut() {
        for (var, value) in c.variables.iter_mut() {
            *value = render(value, set, &declared).map_err(|e| (id.clone(), var.clone(), e))?;
            count(id, var, value)?;
        }
        let mut rules = Vec::with_capacity(c.allowed_outbound_hosts.len());
        for (i, rule) in c.allowed_outbound_hosts.iter().enumerate() {
            if !rule.contains("{{") {
                rules.push(rule.clone());
                continue;
            }
            let field = format!("allowed_outbound_hosts[{i}]");
            let rendered =
                render(rule, set, &declared).map_err(|e| (id.clone(), field.clone(), e))?;
            count(id, &field, &rendered)?;
            let parsed = edge_config::OutboundRule::parse_rendered(&rendered).map_err(|e| {
                // Values stay out of the message: a secret's would reach
                // the API's answer and the audit log.
                let mut why = e;
                for name in references(rule).unwrap_or_default() {
                    let value = set
                        .get(name)
                        .or_else(|| declared.get(name).and_then(|d| d.default.as_ref()));
                    if let Some(v) = value.filter(|v| !v.is_empty()) {
                        why = why.replace(v.as_str(), &format!("{{{{ {name} }}}}"));
                    }
                }
                (
                    id.clone(),
                    field,
                    format!("{rule:?} does not make an outbound rule with the values set: {why}"),
                )
            })?;
            rules.extend(parsed.map(|r| r.as_str().to_string()));
        }
        c.allowed_outbound_hosts = rules;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version of one component `api` with these variables and outbound
    /// rules, declaring `declared`.
    fn spec(
        variables: Vec<(String, String)>,
        rules: &[&str],
        declared: BTreeMap<String, VariableDecl>,
    ) -> VersionSpec {
        VersionSpec {
            components: BTreeMap::from([(
                "api".to_string(),
                crate::model::ComponentSpec {
                    digest: "sha256:00".into(),
                    key_value_stores: Vec::new(),
                    sqlite_databases: Vec::new(),
                    allowed_outbound_hosts: rules.iter().map(|r| r.to_string()).collect(),
                    variables: variables.into_iter().collect(),
                    files: Vec::new(),
                },
            )]),
            routes: Vec::new(),
            variables: declared,
        }
    }

    #[test]
    fn templates_render_from_set_values_then_defaults() {
        let set = BTreeMap::from([("key".to_string(), "s3cret".to_string())]);
        let declared = BTreeMap::from([
            (
                "key".to_string(),
                VariableDecl {
                    secret: true,
                    ..Default::default()
                },
            ),
            (
                "region".to_string(),
                VariableDecl {
                    default: Some("eu".into()),
                    ..Default::default()
                },
            ),
            ("missing".to_string(), VariableDecl::default()),
        ]);
        assert_eq!(
            render("{{ key }}@{{region}}", &set, &declared).unwrap(),
            "s3cret@eu"
        );
        assert!(
            render("{{ missing }}", &set, &declared)
                .unwrap_err()
                .contains("has no value")
        );
        assert!(
            render("{{ other }}", &set, &declared)
                .unwrap_err()
                .contains("not declared")
        );
        assert_eq!(references("a {{ b }} {{c_1}}").unwrap(), ["b", "c_1"]);
        assert!(references("{{ B }}").is_err());
        assert!(references("{{ open").is_err());
    }

    #[test]
    fn rendering_is_bounded_per_template_and_per_version() {
        let big = "v".repeat(64 << 10);
        let set = BTreeMap::from([("a".to_string(), big)]);
        let declared = BTreeMap::from([("a".to_string(), VariableDecl::default())]);
        let spec = |variables| spec(variables, &[], declared.clone());
        // Five bytes naming 64 KiB, a million times: 64 GiB unbounded.
        let mut s = spec(vec![("x".into(), "{{a}}".repeat(1 << 20))]);
        let (_, field, why) = render_spec(&mut s, &set).unwrap_err();
        assert_eq!(field, "x");
        assert!(why.contains("renders to more than 1048576 bytes"), "{why}");
        // Each within its bound, 300 of them past the version's.
        let many = (0..300)
            .map(|i| (format!("v{i}"), "{{a}}".into()))
            .collect();
        let mut s = spec(many);
        let (_, _, why) = render_spec(&mut s, &set).unwrap_err();
        assert!(why.contains("more than 16777216 bytes in all"), "{why}");
        let fewer = (0..200)
            .map(|i| (format!("v{i}"), "{{a}}".into()))
            .collect();
        render_spec(&mut spec(fewer), &set).unwrap();
    }

    #[test]
    fn outbound_templates_render_and_must_make_rules() {
        let declared = BTreeMap::from([
            ("db_host".to_string(), VariableDecl::default()),
            (
                "extra".to_string(),
                VariableDecl {
                    default: Some(String::new()),
                    ..Default::default()
                },
            ),
        ]);
        let spec = |rules: &[&str]| spec(Vec::new(), rules, declared.clone());
        let set = BTreeMap::from([("db_host".to_string(), "10.0.0.5".to_string())]);
        let mut s = spec(&[
            "https://fixed.example",
            "mysql://{{ db_host }}:3306",
            "{{ extra }}",
            "https://{{extra}}",
        ]);
        render_spec(&mut s, &set).unwrap();
        assert_eq!(
            s.components["api"].allowed_outbound_hosts,
            ["https://fixed.example", "mysql://10.0.0.5:3306"]
        );
        let bad = BTreeMap::from([("db_host".to_string(), "h/x".to_string())]);
        let mut s = spec(&["mysql://{{ db_host }}:3306"]);
        let (component, field, why) = render_spec(&mut s, &bad).unwrap_err();
        assert_eq!(
            (component.as_str(), field.as_str()),
            ("api", "allowed_outbound_hosts[0]")
        );
        assert!(why.contains("does not make an outbound rule"), "{why}");
        assert!(!why.contains("h/x"), "the value stays out: {why}");
        let mut s = spec(&["mysql://{{ db_host }}:3306"]);
        let (_, _, why) = render_spec(&mut s, &BTreeMap::new()).unwrap_err();
        assert!(why.contains("has no value"), "{why}");
    }
}
