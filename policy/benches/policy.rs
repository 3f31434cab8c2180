//! Hot-path benchmarks: the decision for a 200-tool profile (a path rule, a
//! command rule), redaction of a 1 MiB result, the poisoning scan of a
//! 200-tool list, input validation of a typical call, and canonical hashing
//! of a 200-tool list. Run: `cargo bench -p mcp-warden-policy`.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_warden_policy::spec::{FacadePolicy, Redaction, Role};
use mcp_warden_policy::{
    definition_hash, poison, CompiledPolicy, ObservedTool, Redactor, SchemaCache,
};
use serde_json::{json, Value};

fn tool_def(i: usize) -> Value {
    json!({
        "name": format!("tool_{i}"),
        "description": format!("Reads item {i} from the workspace and returns it as text."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Workspace-relative path"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["path"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    })
}

fn policy_200() -> FacadePolicy {
    let mut yaml = String::from("riskCeiling: high\ntools:\n");
    for i in 0..200 {
        yaml.push_str(&format!(
            "  - name: tool_{i}\n    alias: t_{i}\n    requiredRole: viewer\n    arguments:\n      - {{name: path, kind: path, root: /workspace, allow: ['**'], check: ['secrets/**'], deny: ['**/.git/**', '**/*.pem']}}\n"
        ));
    }
    FacadePolicy::from_yaml_str(&yaml, "bench").unwrap()
}

fn decision(c: &mut Criterion) {
    let policy = CompiledPolicy::compile(&policy_200()).unwrap();
    let upstream: HashMap<String, ObservedTool> = (0..200)
        .map(|i| ObservedTool::new(tool_def(i)).unwrap())
        .map(|t| (t.name.clone(), t))
        .collect();
    let args = json!({"path": "src/module/file.rs", "limit": 10});
    let mut g = c.benchmark_group("decision");
    g.bench_function("call_200_tool_profile_with_path_rule", |b| {
        b.iter(|| {
            let d = policy.decide_call(black_box("t_137"), Some(Role::User), false, &args, |n| {
                upstream.get(n)
            });
            black_box(d.is_allow())
        })
    });
    g.bench_function("call_unknown_tool", |b| {
        b.iter(|| {
            black_box(
                policy
                    .decide_call(black_box("nope"), Some(Role::User), false, &args, |n| {
                        upstream.get(n)
                    })
                    .is_allow(),
            )
        })
    });
    let shell_policy = CompiledPolicy::compile(
        &FacadePolicy::from_yaml_str(
            "tools:\n  - name: tool_1\n    arguments:\n      - {name: path, kind: command, allow: ['git status', 'git log *', 'git diff *', 'ls *', 'cat *'], check: ['git push'], deny: ['rm', 'git diff --output', 'git --exec-path']}\n",
            "bench",
        )
        .unwrap(),
    )
    .unwrap();
    let shell_args = json!({"path": "git log --oneline -n 20 -- src/lib.rs && ls -la src"});
    assert!(
        shell_policy
            .decide_call("tool_1", Some(Role::User), false, &shell_args, |n| upstream
                .get(n))
            .is_allow(),
        "the benchmark measures an allowed call"
    );
    g.bench_function("call_command_rule", |b| {
        b.iter(|| {
            let d = shell_policy.decide_call(
                black_box("tool_1"),
                Some(Role::User),
                false,
                &shell_args,
                |n| upstream.get(n),
            );
            black_box(d.is_allow())
        })
    });
    let tools: Vec<&ObservedTool> = upstream.values().collect();
    g.throughput(Throughput::Elements(200));
    g.bench_function("list_200_tools", |b| {
        b.iter(|| {
            tools
                .iter()
                .filter(|t| policy.decide_list(t, Some(Role::User), false).is_allow())
                .count()
        })
    });
    g.finish();
}

fn redaction(c: &mut Criterion) {
    let r = Redactor::new(&Redaction::default()).unwrap();
    let line = "2024-05-01 12:00:01 INFO request handled path=/api/v1/items/42 status=200 duration_ms=13 user=alice région=ÉU\n";
    let clean: String = line.repeat((1 << 20) / line.len() + 1)[..1 << 20].to_string();
    let mut dirty = clean.clone();
    dirty.replace_range(1000..1040, "token ghp_abcdefghijklmnopqrstuvwxyz0123456789");
    let mut g = c.benchmark_group("redaction");
    g.throughput(Throughput::Bytes(clean.len() as u64));
    g.bench_function("1MiB_clean", |b| {
        b.iter(|| {
            let mut counts = r.counts();
            black_box(r.redact(black_box(&clean), &mut counts).len())
        })
    });
    g.bench_function("1MiB_one_secret", |b| {
        b.iter(|| {
            let mut counts = r.counts();
            black_box(r.redact(black_box(&dirty), &mut counts).len())
        })
    });
    g.finish();
}

fn schema(c: &mut Criterion) {
    let cache = SchemaCache::new();
    let def = tool_def(1);
    let hash = definition_hash(&def);
    let good = json!({"path": "src/lib.rs", "limit": 10, "tags": ["a", "b"]});
    let bad = json!({"path": 3, "limit": 0, "extra": true});
    cache.validate_input(&hash, &def, &good).unwrap();
    let mut g = c.benchmark_group("schema");
    g.bench_function("validate_typical_call", |b| {
        b.iter(|| black_box(cache.validate_input(&hash, &def, black_box(&good)).is_ok()))
    });
    g.bench_function("validate_invalid_call_all_errors", |b| {
        b.iter(|| black_box(cache.validate_input(&hash, &def, black_box(&bad)).is_err()))
    });
    g.finish();
}

fn hashing(c: &mut Criterion) {
    let defs: Vec<Value> = (0..200).map(tool_def).collect();
    let mut g = c.benchmark_group("pin");
    g.throughput(Throughput::Elements(200));
    g.bench_function("hash_200_tools", |b| {
        b.iter(|| {
            defs.iter()
                .map(definition_hash)
                .filter(|h| h.len() == 71)
                .count()
        })
    });
    g.finish();
}

fn scan(c: &mut Criterion) {
    let defs: Vec<Value> = (0..200).map(tool_def).collect();
    let names: Vec<String> = (0..200).map(|i| format!("tool_{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut g = c.benchmark_group("scan");
    g.throughput(Throughput::Elements(200));
    g.bench_function("scan_200_tools", |b| {
        b.iter(|| {
            defs.iter()
                .map(|d| poison::scan(black_box(d), &names).len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, decision, redaction, scan, schema, hashing);
criterion_main!(benches);
