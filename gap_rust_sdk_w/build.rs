//! Builds csrc/shims.c against the GAP SDK headers when `GAP_SDK_HOME` is set (32-bit RISC-V
//! targets only; the host needs no shims). Without the SDK: one `cargo:warning` line, no library.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gap_rust_sdk_w_shims)");
    println!("cargo:rerun-if-env-changed=GAP_SDK_HOME");
    println!("cargo:rerun-if-changed=csrc");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("riscv32") {
        return;
    }
    let Some(sdk) = env::var_os("GAP_SDK_HOME").map(PathBuf::from) else {
        println!(
            "cargo:warning=gap_rust_sdk_w: GAP_SDK_HOME is not set, so the pmsis C shims are not built \
             (the Rust side compile-checks; linking a pmsis program needs the GAP SDK)"
        );
        return;
    };
    let rtos = sdk.join("rtos");
    if !rtos.join("pmsis/api/include/pmsis.h").exists() && !rtos.join("pmsis/api/include").exists()
    {
        println!(
            "cargo:warning=gap_rust_sdk_w: GAP_SDK_HOME={} has no rtos/pmsis/api/include, so the pmsis C shims \
             are not built",
            sdk.display()
        );
        return;
    }
    build(&rtos);
    println!("cargo:rustc-cfg=gap_rust_sdk_w_shims");
}

/// The include path and defines of gap_sdk's `rtos/freeRTOS/vendors/gwt/rules/freeRTOS_rules.mk`
/// for GAP8 (board ai_deck / gapuino, GVSOC platform).
fn build(rtos: &Path) {
    let gwt = rtos.join("freeRTOS/vendors/gwt");
    let includes = [
        rtos.join("freeRTOS/freertos_kernel/include"),
        rtos.join("freeRTOS/demos/gwt/config/gap8"),
        rtos.join("freeRTOS/freertos_kernel/portable/GCC/RI5CY-GAP8"),
        gwt.clone(),
        gwt.join("gap8/include"),
        gwt.join("gap8/include/driver"),
        gwt.join("libs/include"),
        gwt.join("libs/printf"),
        gwt.join("pmsis/include"),
        rtos.join("pmsis/api/include"),
        rtos.join("pmsis/archi/include"),
        gwt.join("pmsis/backend/include"),
        gwt.join("gap8/pmsis"),
        gwt.join("gap8/pmsis/include"),
        gwt.join("gap8/pmsis/include/cores/TARGET_RISCV_32"),
        gwt.join("gap8/pmsis/include/pmsis/implem"),
        gwt.join("gap8/pmsis/include/pmsis/targets"),
        rtos.join("pmsis/bsp/include"),
        gwt.join("pmsis/rtos"),
        gwt.join("pmsis/rtos/include"),
        rtos.join("pmsis/implem/include"),
    ];
    let mut b = cc::Build::new();
    if env::var_os("CC_riscv32imc_unknown_none_elf").is_none() && env::var_os("TARGET_CC").is_none()
    {
        b.compiler("riscv64-unknown-elf-gcc")
            .archiver("riscv64-unknown-elf-ar");
    }
    b.no_default_flags(true)
        .file("csrc/shims.c")
        .include("csrc")
        .includes(&includes)
        .flag("--specs=picolibc.specs")
        .flag("-march=rv32imc")
        .flag("-misa-spec=2.2")
        .flag("-mabi=ilp32")
        .flag("-Os")
        .flag("-std=gnu99")
        .flag("-ffunction-sections")
        .flag("-Werror=implicit-function-declaration")
        .warnings(false);
    for d in [
        "__riscv__",
        "__GAP__",
        "__GAP8__",
        "FEATURE_CLUSTER=1",
        "__FREERTOS__",
        "PREEMPTION",
    ] {
        let (k, v) = d.split_once('=').map_or((d, None), |(k, v)| (k, Some(v)));
        b.define(k, v);
    }
    b.define("__RISCV_ARCH_GAP__", "1")
        .define("CHIP_VERSION", "2")
        .define("__PLATFORM_GVSOC__", None)
        .define("__PLATFORM__", "ARCHI_PLATFORM_GVSOC");
    b.compile("gap_rust_sdk_w");
}
