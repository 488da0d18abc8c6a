//! Probe: an actor spawns a child and spins without a safe point; the idle worker must steal
//! the child. Prints the idle state when it does not within 200 ms.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use threadlet_runtime::{Runtime, spawn};

fn main() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let mut slow = 0;
    for i in 0..300 {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let h = rt.spawn(move || {
            let f2 = f.clone();
            let _h = spawn(move || f2.store(true, Ordering::SeqCst));
            let t = Instant::now();
            while !f.load(Ordering::SeqCst) && t.elapsed() < Duration::from_millis(400) {
                std::hint::spin_loop();
            }
        });
        let t = Instant::now();
        while !flag.load(Ordering::SeqCst) {
            if t.elapsed() > Duration::from_millis(200) {
                let st = rt.stats();
                eprintln!(
                    "try {i}: searching {} parked {} {:?}",
                    st.searching, st.parked, st.workers
                );
                slow += 1;
                break;
            }
            std::thread::yield_now();
        }
        h.join().unwrap();
        if i % 3 == 0 {
            std::thread::sleep(Duration::from_micros(50 * (i as u64 % 7)));
        }
    }
    println!("slow: {slow}/300");
}
