//! Builds the BPF programs in `bpf/` and the portable congestion-control algorithms (the C sources
//! the simulator also compiles, wrapped in `bpf/scc_kernel.h`) into libbpf-rs skeletons, against a
//! `vmlinux.h` generated from the running kernel's BTF, and compiles the option codec for
//! userspace tests.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The programs, one per mechanism; each becomes `$OUT_DIR/<name>.skel.rs`.
const PROGRAMS: &[&str] = &["agent", "cc_select", "int_switch", "proxy"];

/// The portable algorithms, `<name>.c` in `PORTABLE`; each becomes a struct_ops of that name.
const ALGORITHMS: &[&str] = &["newreno", "dctcp", "ecn_int", "retcp"];
const PORTABLE: &str = "../sluice-sim/src/cc/portable";

const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let bpf = Path::new("bpf");
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-changed={PORTABLE}");
    println!("cargo:rerun-if-changed={BTF}");

    vmlinux_h(&out);
    let inc = out.to_str().expect("OUT_DIR is UTF-8").to_string();
    let mut sources: Vec<(String, PathBuf)> = PROGRAMS.iter().map(|n| (n.to_string(), bpf.join(format!("{n}.bpf.c")))).collect();
    for name in ALGORITHMS {
        // The algorithm's own file after the kernel glue, which turns SCC_ALGORITHM into struct_ops.
        let src = out.join(format!("{name}.bpf.c"));
        let text = format!("#include \"vmlinux.h\"\n#include \"scc_kernel.h\"\n#include \"{name}.c\"\n");
        fs::write(&src, text).unwrap_or_else(|e| fail(&format!("writing {}: {e}", src.display())));
        sources.push((name.to_string(), src));
    }
    // The same sources as syscall programs that replay a recorded step (bpf/scc_replay.h), in the
    // standard build and in the mutant one (a loss quarters the window), for the converse
    // differential test; objects only, loaded from bytes by `cc::replay_in_kernel`.
    for name in ALGORITHMS {
        for (suffix, defines) in [("replay", ""), ("replay_mutant", "#define SCC_LOSS_SHIFT 2\n")] {
            let src = out.join(format!("{name}_{suffix}.bpf.c"));
            let text = format!("#include \"vmlinux.h\"\n{defines}#include \"scc_replay.h\"\n#include \"{name}.c\"\n");
            fs::write(&src, text).unwrap_or_else(|e| fail(&format!("writing {}: {e}", src.display())));
            SkeletonBuilder::new()
                .source(&src)
                .obj(out.join(format!("{name}_{suffix}.bpf.o")))
                .clang_args(["-I", &inc, "-I", "bpf", "-I", PORTABLE, "-Wall", "-Wno-unused-parameter", "-Wno-unused-function"])
                .build()
                .unwrap_or_else(|e| fail(&format!("compiling {} with clang: {e:#}", src.display())));
        }
    }
    for (name, src) in &sources {
        let skel = out.join(format!("{name}.skel.rs"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args(["-I", &inc, "-I", "bpf", "-I", PORTABLE, "-Wall", "-Wno-unused-parameter", "-Wno-unused-function", "-Wno-compare-distinct-pointer-types"])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| fail(&format!("compiling {} with clang: {e:#}", src.display())));
    }

    cc::Build::new().file(bpf.join("tcp_int_user.c")).include(bpf).warnings(true).compile("tcp_int_user");
}

/// Writes `vmlinux.h` for the running kernel (never committed: it must match the kernel).
fn vmlinux_h(out: &Path) {
    if !Path::new(BTF).exists() {
        fail(&format!("{BTF} is missing: the kernel must be built with CONFIG_DEBUG_INFO_BTF=y"));
    }
    let res = Command::new("bpftool").args(["btf", "dump", "file", BTF, "format", "c"]).output();
    match res {
        Ok(o) if o.status.success() => {
            fs::write(out.join("vmlinux.h"), o.stdout).unwrap_or_else(|e| fail(&format!("writing vmlinux.h: {e}")))
        }
        Ok(o) => fail(&format!("bpftool btf dump failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => fail(&format!("running bpftool ({e}): install it, e.g. `apt-get install bpftool`")),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("sluice-host build: {msg}");
    std::process::exit(1);
}
