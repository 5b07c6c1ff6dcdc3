fn main() -> std::process::ExitCode {
    sunk::cli::main()
}
