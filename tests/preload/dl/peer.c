/* A library the dlsym tests look things up in, after the program in load
 * order (what dlsym(RTLD_NEXT, ...) from the program finds): a TLS variable,
 * one function in two versions, names that look like other CUDA libraries'.
 * Built with --hash-style=sysv and the version script peer.map. */
__thread int peer_tls = 42;
int *peer_tls_addr(void) { return &peer_tls; }

int peer_fn_v1(void) { return 1; }
int peer_fn_v2(void) { return 2; }
__asm__(".symver peer_fn_v1, peer_fn@PEER_1");
__asm__(".symver peer_fn_v2, peer_fn@@PEER_2");

int peer_plain(void) { return 7; }
/* Found by name, from libraries that are not the driver. */
int curl_peer_version(void) { return 8; }
int cuPeerNotTheDriver(void) { return 9; }
