//! With tracing never enabled (its own process), every helper answers
//! nothing, even inside spans of a subscriber.

#[test]
fn off_means_no_context_anywhere() {
    let span = tracing::info_span!("work");
    let _entered = span.enter();
    assert_eq!(chatlab_telemetry::current_traceparent(), None);
    assert_eq!(chatlab_telemetry::sampled_trace_id(&span), None);
    let mut written = Vec::new();
    chatlab_telemetry::inject_current(|k, v| written.push((k, v)));
    assert!(written.is_empty());
    assert!(!chatlab_telemetry::enabled());
}
