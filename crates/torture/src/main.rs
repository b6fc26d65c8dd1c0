//! Placeholder until this tool lands.

fn main() {
    eprintln!("not built yet");
    std::process::exit(2);
}
