//! The policy file loader (`FacadePolicy::from_yaml_str`, YAML or JSON) and the
//! compiler (`CompiledPolicy::compile`) on arbitrary text: a hot-reloaded
//! policy file is read as the facade runs, so a bad one must be an error,
//! never a panic or a hang.
//!
//! Checks: a policy that loads also serializes, and the serialized YAML
//! loads again to the same policy (compared through a second serialization,
//! so floats compare by text); compiling it returns Ok or a list of errors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_warden_crds::policy::FacadePolicy;
use mcp_warden_policy::CompiledPolicy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(policy) = FacadePolicy::from_yaml_str(text, "fuzz.yaml") else {
        return;
    };
    match CompiledPolicy::compile(&policy) {
        Ok(compiled) => {
            let _ = compiled.tools().len();
        }
        Err(errors) => assert!(!errors.is_empty(), "compile failed with no error"),
    }
    let yaml = serde_yaml_ng::to_string(&policy).expect("a loaded policy serializes");
    let again = FacadePolicy::from_yaml_str(&yaml, "again.yaml")
        .unwrap_or_else(|e| panic!("a serialized policy does not load again: {e}\n{yaml}"));
    let yaml2 = serde_yaml_ng::to_string(&again).expect("serializes");
    assert_eq!(yaml, yaml2, "the policy changed through a YAML round trip");
});
