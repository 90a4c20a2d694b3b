//! Whether an OpenTelemetry layer is installed.

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Marks tracing as on: call once the OpenTelemetry layer is installed.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}
