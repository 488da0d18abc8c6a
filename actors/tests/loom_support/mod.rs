//! What the loom models of this crate share: how a model is run.

/// Runs a model with at most 3 preemptions per execution. The full search of the models with
/// three threads, or two sends and two receives, takes hours; 3 preemptions cover every
/// interleaving of one thread's step with another's, with the other steps anywhere.
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}
