// Package nodewire is the socket protocol between `shmloader serve` (one loader per node) and
// the ranks' gobatch.Loaders (python/gobatch/_node.py): what crosses the socket and who may
// send it, not what the server does with it. A connection is SOCK_SEQPACKET: one JSON object
// a message, at most [MaxMessage] bytes.
//
// Peers: the server admits a peer whose uid (SO_PEERCRED) is its own or an allowed one
// ([Admit]), answering another with an error ([Refuse]); an abstract socket has no file
// permissions, so this is the only gate against other users. A [Gate] bounds the descriptors
// spent on peers that are not ranks yet (handshakes per uid, lingering refusals), with a
// reserve for the ranks ([Limits]).
//
// Restarts: a server's welcome names the socket its ranks restart it at should it die
// ([NextName]: random, told only to admitted peers), so no other user can hold that name.
//
// Handshake: both ends prove that they know the node's secret ([SecretEnv], taken once by
// [TakeSecret]) by an HMAC-SHA256 over two fresh nonces, so the secret never crosses the
// socket ([Auth]; the server's side is [Greet] and [Auth.Check]):
//
//	rank   -> server  {"hello": Nr}                                   (Hello)
//	server -> rank    {"nonce": Ns, "proof": HMAC(K, "serve" Nr Ns), "next": NAME}  (Welcome)
//	rank   -> server  its first request, "auth": HMAC(K, "rank" Nr Ns)
//
// Requests and replies: a [Request] asks for a rank's ring, a [Reply] answers it; either may
// carry one descriptor (SCM_RIGHTS): the ring's memfd in a reply, the ring to join in a
// request ([ReadMsg], [Send]).
//
// Policy stays with the caller (cmd/shmloader): timeouts, sessions, logging, what a request
// opens, and what a rank's death does to the others.
package nodewire
