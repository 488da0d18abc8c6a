use threadlet_runtime::{Runtime, spawn, yield_now};

#[test]
fn block_on_returns_value() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    assert_eq!(rt.block_on(|| 40 + 2), 42);
}

#[test]
fn many_spawns_join() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let total = rt.block_on(|| {
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| {
                spawn(move || {
                    yield_now();
                    i
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, 10_000 * 9_999 / 2);
}
