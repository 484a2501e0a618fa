"""Speed benchmarks: scripts that time the project's parts and print figures
(``python -m speed.bench_NAME --help``). They may import anything, the methods' internals
included; nothing imports them."""
