#[global_allocator]
static ALLOCATOR: sunk::heap::CountingAllocator = sunk::heap::CountingAllocator;

fn main() -> std::process::ExitCode {
    sunk::heap::tune_allocator();
    sunk::cli::main()
}
