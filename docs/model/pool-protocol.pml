/*
 * pool-protocol.pml: a Spin model of the pool's lease-ending protocol (pool/pool.c,
 * "cross-thread returns"; the argument in docs/pool-protocol.md).
 *
 * One slot, two thread caches (C1, C2) with their remote-return lists, and the threads
 * that return leases. Lease 1 is rented by C1. Its copy is returned at once by C1's own
 * thread (the warm path: plain loads of word and remote, then a plain store) and by two
 * other threads (claims), in every interleaving. Once lease 1 has ended, the slot may be
 * rented again, as lease 3, by C1 or by C2 (its buffer reached C2 through a shared
 * stack); lease 3 is returned by another thread, whose claim may take the place of a
 * stale claim of lease 1 still queued on C1's list, so C1 passes it on to C2; the
 * renter of lease 3 returns it itself as well, racing that claim.
 * Every C11 atomic operation of the code is one atomic step here; relaxed, acquire and
 * release orderings are modelled as sequentially consistent (docs/pool-protocol.md says
 * why the real orderings suffice).
 *
 * A cache's thread stops only when no list holds the slot and no collection is under
 * way (a real thread collects at its next call or at its exit).
 * Checked: a lease ends at most once (ended[g] <= 1: its buffer never has two owners);
 * a slot is on at most one list; at the end, every call was counted once:
 * each accepted call either ended its lease or was refused at collection, and every
 * lease that was returned at all has ended.
 *
 * Run: spin -a pool-protocol.pml && cc -O2 -o pan pan.c && ./pan -m100000
 * (scripts/check-pool-model.sh does that; exit 0 and "errors: 0" is a pass.)
 */

byte word = 1;          /* the slot's handle word: odd = leased; lease 1 is out */
byte owner = 1;         /* the cache that rented the current lease */
byte remote = 0;        /* the claim: 0, or the handle of a queued cross-thread return */
bool queued[3];         /* queued[c]: the slot is on cache c's remote-return list */
byte ended[4];          /* ended[g]: how many times lease g ended */
byte accepted = 0;      /* calls that returned LDS_OK */
byte refused_now = 0;   /* calls refused at the call */
byte refused_later = 0; /* accepted claims refused at collection (or displaced) */
byte calls = 0;         /* return calls made */
byte finished = 0;      /* returner processes done */
bool rented3 = false;
byte caches_done = 0;
byte collecting = 0;    /* collections under way (a list taken, its slot not yet settled) */

/* Ends lease g in cache c (the owner only). */
inline end_lease(g) {
    assert(word == g);
    word = g + 1;
    ended[g]++;
    assert(ended[g] <= 1)
}

/* remote_claim + remote_push: the claim of handle h for the cache o read as its owner. */
inline claim(h, o, counted) {
    cur = remote;
    do
    :: cur != 0 && cur >= h ->
        if :: counted -> refused_now++ :: else -> refused_later++ fi;
        break
    :: else ->
        atomic {
            if
            :: remote == cur -> remote = h; ok = true
            :: else -> cur = remote; ok = false
            fi
        }
        if
        :: ok ->
            if :: counted -> accepted++ :: else -> skip fi;
            if
            :: cur == 0 -> atomic { assert(!queued[1] && !queued[2]); queued[o] = true }
            :: else -> refused_later++ /* the stale claim it displaced */
            fi;
            break
        :: else -> skip
        fi
    od
}

/* remote_collect of cache c: takes its list, ends each live claimed lease of its own,
 * passes on a live one of another cache, refuses the rest. */
inline collect(c) {
    atomic { if :: queued[c] -> queued[c] = false; got = true; collecting++ :: else -> got = false fi };
    if
    :: got ->
        atomic { r = remote; remote = 0 };
        if
        :: word != r -> refused_later++
        :: else ->
            if
            :: owner == c -> end_lease(r)
            :: else -> claim(r, owner, false)
            fi
        fi;
        collecting--
    :: else -> skip
    fi
}

/* The owner's own return of lease g: the warm path (plain loads of word, owner and
 * remote, then a plain store), else the slow path (collect first, then re-check). */
inline own_return(g) {
    calls++;
    w = word;
    r = remote;
    if
    :: w == g && owner == c && r == 0 -> end_lease(g); accepted++
    :: else ->
        collect(c);
        if
        :: word == g && remote != g -> end_lease(g); accepted++
        :: else -> refused_now++
        fi
    fi
}

/* Another thread's return of lease h (return_full, not the owner). */
proctype Returner(byte h) {
    byte cur, o;
    bool ok;
    calls++;
    if
    :: word != h -> refused_now++
    :: else ->
        o = owner; /* read after the word, as in return_full */
        claim(h, o, true)
    fi;
    finished++
}

/* Cache c's thread: for C1, its own return of lease 1; then, for either, renting lease 3
 * once lease 1 has ended, and returning it itself too (racing another thread's return of
 * it); collecting its list. */
proctype Cache(byte c) {
    byte w, r, cur;
    bool got, ok;
    if
    :: c == 1 -> own_return(1)
    :: else -> skip
    fi;
    do
    :: atomic { word == 2 && !rented3 -> rented3 = true; owner = c; word = 3 };
        run Returner(3);
        own_return(3)
    :: collect(c)
    :: atomic { finished == 3 && !queued[1] && !queued[2] && collecting == 0 -> break }
    od;
    caches_done++
}

init {
    atomic {
        run Cache(1);
        run Cache(2);
        run Returner(1);
        run Returner(1)
    }
}

/* At the end (every returner and both caches done, no list holds the slot): each call
 * was counted once, and every lease that was returned at all has ended. */
active proctype Monitor() {
    (finished == 3 && caches_done == 2) ->
    assert(!queued[1] && !queued[2]);
    assert(accepted + refused_now == calls);
    assert(accepted == ended[1] + ended[3] + refused_later);
    assert(ended[1] == 1);
    assert(!rented3 || ended[3] == 1)
}
