/* vocab_build.c — the corpus walk and WordPiece vocabulary training (see
 * vocab_build.h for the rules and the output layout).
 *
 * Data structures, all indexes into growable arrays:
 *   words   distinct words: frequency and the current symbol sequence
 *   syms    pieces: string (in one arena), "##" or not, occurrence count
 *           (sum of the frequencies of the words holding it, per position),
 *           and the pairs it belongs to (adjacency)
 *   pairs   adjacent symbol pairs: count, a version, the words holding them
 *   heap    candidate merges ordered by score, lazily invalidated: an entry
 *           is live only while its version equals its pair's
 * A merge of (a, b) rewrites each word holding the pair, moves the counts of
 * the neighbouring pairs (x,a) (b,y) to (x,ab) (ab,y), and re-pushes every
 * pair whose score changed: those whose count moved, and all pairs of a, b
 * and ab (their symbol counts, the score's denominators, changed). Cost per
 * merge: the words of the pair (plus, for the likelihood score, the pairs
 * of its symbols); a few MB of text trains in about a second.
 */
#include "vocab_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "text_shards.h"
#include "utf8.h"
#include "wordpiece.h"
#include "engine/error.h"
#include "data_util.h"

/* ---- string -> index hash ------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t z)
{
    z ^= z >> 33;
    z *= 0xff51afd7ed558ccdull;
    z ^= z >> 33;
    z *= 0xc4ceb9fe1a85ec53ull;
    return z ^ (z >> 33);
}

/* Strings in an arena: entries 0..n-1 with (off, len), open-addressed slots
 * holding index + 1. Used for both words and symbols. */
typedef struct {
    char *arena;
    size_t an, acap;
    uint64_t *off;
    uint32_t *len;
    size_t n, cap;
    uint32_t *slots;
    size_t nslots;
} StrSet;

static const char *strset_str(const StrSet *s, uint32_t i) { return s->arena + s->off[i]; }

static int strset_rehash(StrSet *s, size_t nslots)
{
    uint32_t *sl = calloc(nslots, sizeof *sl);
    if (!sl) return -1;
    for (uint32_t i = 0; i < s->n; i++) {
        size_t h = hash_bytes(strset_str(s, i), s->len[i]) & (nslots - 1);
        while (sl[h]) h = (h + 1) & (nslots - 1);
        sl[h] = i + 1;
    }
    free(s->slots);
    s->slots = sl;
    s->nslots = nslots;
    return 0;
}

/* Index of str[0..n), added when absent (*added set). -1 on no memory. */
static int64_t strset_get(StrSet *s, const char *str, size_t n, int add, int *added)
{
    if (added) *added = 0;
    if (!s->nslots && strset_rehash(s, 1024)) return -1;
    size_t h = hash_bytes(str, n) & (s->nslots - 1);
    while (s->slots[h]) {
        uint32_t i = s->slots[h] - 1;
        if (s->len[i] == n && !memcmp(strset_str(s, i), str, n)) return i;
        h = (h + 1) & (s->nslots - 1);
    }
    if (!add) return -2;
    if (s->n >= UINT32_MAX - 1) return -1;
    size_t oldcap = s->cap;
    if (data_grow((void **)&s->arena, &s->acap, s->an + n + 1, 1) ||
        data_grow((void **)&s->off, &s->cap, s->n + 1, sizeof *s->off))
        return -1;
    if (s->cap != oldcap) {
        uint32_t *l = realloc(s->len, s->cap * sizeof *l);
        if (!l) return -1;
        s->len = l;
    }
    memcpy(s->arena + s->an, str, n);
    s->arena[s->an + n] = 0;
    s->off[s->n] = s->an;
    s->len[s->n] = (uint32_t)n;
    s->an += n + 1;
    s->slots[h] = (uint32_t)s->n + 1;
    s->n++;
    if (added) *added = 1;
    if (2 * s->n > s->nslots && strset_rehash(s, 2 * s->nslots)) return -1;
    return (int64_t)s->n - 1;
}

static void strset_free(StrSet *s)
{
    free(s->arena);
    free(s->off);
    free(s->len);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

/* ---- training state -------------------------------------------------------- */

typedef struct {
    uint64_t count;
    uint32_t *adj; /* pairs holding this symbol (dead ones included) */
    uint32_t nadj, cadj;
    uint8_t cont;  /* "##" piece */
} Sym;

typedef struct {
    uint32_t a, b, ver;
    uint64_t count;
    uint32_t *words; /* words holding the pair (may repeat, may be stale) */
    uint32_t nw, cw;
} Pair;

typedef struct {
    uint64_t pc, ca, cb; /* pair and symbol counts when pushed */
    uint32_t pair, ver;
} HeapEnt;

typedef struct {
    StrSet words;
    uint64_t *wfreq;          /* [words.n] */
    uint32_t *wnchars;        /* [words.n] */
    size_t wfcap;
    StrSet syms;
    Sym *sym;
    size_t symcap;
    uint32_t *seq;            /* symbol sequences of all words */
    uint64_t *seq_off;        /* [words.n] */
    uint32_t *seq_len;        /* [words.n] */
    uint32_t *word_stamp;     /* [words.n] last merge that rewrote the word */
    Pair *pair;
    size_t npair, paircap;
    uint32_t *pslots;         /* (a,b) -> pair index + 1 */
    size_t npslots;
    uint32_t *dirty, *dirty_stamp;
    size_t ndirty, dirtycap, dstampcap;
    uint32_t stamp;
    HeapEnt *heap;
    size_t nheap, heapcap;
    uint64_t long_words;
    int score;                /* VocabScore */
} VB;

/* ---- word counting ------------------------------------------------------- */

static int count_word(void *ctx, const char *w, size_t nb, size_t nchars)
{
    VB *vb = ctx;
    if (nchars > WP_MAX_WORD_CHARS) {
        vb->long_words++;
        return 0;
    }
    int added;
    int64_t i = strset_get(&vb->words, w, nb, 1, &added);
    if (i < 0) return WP_ERR_NOMEM;
    if (added) {
        size_t oldcap = vb->wfcap;
        if (data_grow((void **)&vb->wfreq, &vb->wfcap, vb->words.n, sizeof *vb->wfreq))
            return WP_ERR_NOMEM;
        if (vb->wfcap != oldcap) {
            uint32_t *nc = realloc(vb->wnchars, vb->wfcap * sizeof *nc);
            if (!nc) return WP_ERR_NOMEM;
            vb->wnchars = nc;
        }
        vb->wfreq[i] = 0;
        vb->wnchars[i] = (uint32_t)nchars;
    }
    vb->wfreq[i]++;
    return 0;
}

/* Counting the words of the documents a filter keeps (VocabOpts.keep). */
typedef struct {
    VB *vb;
    BasicTok *bt;
    const VocabOpts *opts;
    const char *path;
    int fortune_file;
    uint64_t dropped;
    char msg[256];
} DocCount;

static int count_doc(void *ctx, const char *doc, size_t len)
{
    DocCount *d = ctx;
    if (!d->opts->keep(d->opts->keep_ctx, d->path, d->fortune_file, doc, len)) {
        d->dropped++;
        return 0;
    }
    return basictok_run(d->bt, doc, len, count_word, d->vb, d->msg, sizeof d->msg);
}

/* ---- symbols and pairs ----------------------------------------------------- */

static int64_t sym_get(VB *vb, const char *s, size_t n, int cont)
{
    int added;
    int64_t i = strset_get(&vb->syms, s, n, 1, &added);
    if (i < 0 || !added) return i;
    if (data_grow((void **)&vb->sym, &vb->symcap, vb->syms.n, sizeof *vb->sym)) return -1;
    memset(&vb->sym[i], 0, sizeof vb->sym[i]);
    vb->sym[i].cont = (uint8_t)cont;
    return i;
}

static int adj_push(Sym *s, uint32_t p)
{
    if (s->nadj == s->cadj) {
        size_t c = s->cadj;
        if (data_grow((void **)&s->adj, &c, s->nadj + 1, sizeof *s->adj)) return -1;
        s->cadj = (uint32_t)c;
    }
    s->adj[s->nadj++] = p;
    return 0;
}

static int pslots_rehash(VB *vb, size_t n)
{
    uint32_t *sl = calloc(n, sizeof *sl);
    if (!sl) return -1;
    for (size_t i = 0; i < vb->npair; i++) {
        size_t h = hash_u64((uint64_t)vb->pair[i].a << 32 | vb->pair[i].b) & (n - 1);
        while (sl[h]) h = (h + 1) & (n - 1);
        sl[h] = (uint32_t)i + 1;
    }
    free(vb->pslots);
    vb->pslots = sl;
    vb->npslots = n;
    return 0;
}

/* Index of pair (a, b), created when absent; -1 on no memory. */
static int64_t pair_get(VB *vb, uint32_t a, uint32_t b)
{
    if (!vb->npslots && pslots_rehash(vb, 4096)) return -1;
    size_t h = hash_u64((uint64_t)a << 32 | b) & (vb->npslots - 1);
    while (vb->pslots[h]) {
        uint32_t i = vb->pslots[h] - 1;
        if (vb->pair[i].a == a && vb->pair[i].b == b) return i;
        h = (h + 1) & (vb->npslots - 1);
    }
    if (vb->npair >= UINT32_MAX - 1 ||
        data_grow((void **)&vb->pair, &vb->paircap, vb->npair + 1, sizeof *vb->pair))
        return -1;
    uint32_t i = (uint32_t)vb->npair++;
    memset(&vb->pair[i], 0, sizeof vb->pair[i]);
    vb->pair[i].a = a;
    vb->pair[i].b = b;
    vb->pslots[h] = i + 1;
    if (adj_push(&vb->sym[a], i) || (a != b && adj_push(&vb->sym[b], i))) return -1;
    if (2 * vb->npair > vb->npslots && pslots_rehash(vb, 2 * vb->npslots)) return -1;
    return i;
}

static int mark_dirty(VB *vb, uint32_t p)
{
    size_t old = vb->dstampcap;
    if (data_grow((void **)&vb->dirty_stamp, &vb->dstampcap, vb->npair, sizeof *vb->dirty_stamp))
        return -1;
    if (vb->dstampcap > old) /* new pairs: never marked */
        memset(vb->dirty_stamp + old, 0, (vb->dstampcap - old) * sizeof *vb->dirty_stamp);
    if (vb->dirty_stamp[p] == vb->stamp) return 0;
    vb->dirty_stamp[p] = vb->stamp;
    if (data_grow((void **)&vb->dirty, &vb->dirtycap, vb->ndirty + 1, sizeof *vb->dirty)) return -1;
    vb->dirty[vb->ndirty++] = p;
    return 0;
}

/* count(a,b) += delta (weighted); a positive delta records the word. */
static int pair_add(VB *vb, uint32_t a, uint32_t b, int64_t delta, uint32_t word)
{
    int64_t i = pair_get(vb, a, b);
    if (i < 0) return -1;
    Pair *p = &vb->pair[i];
    p->count += (uint64_t)delta;
    if (delta > 0 && (!p->nw || p->words[p->nw - 1] != word)) {
        if (p->nw == p->cw) {
            size_t c = p->cw;
            if (data_grow((void **)&p->words, &c, p->nw + 1, sizeof *p->words)) return -1;
            p->cw = (uint32_t)c;
        }
        p->words[p->nw++] = word;
    }
    return mark_dirty(vb, (uint32_t)i);
}

/* ---- the heap ----------------------------------------------------------------- */

static int str_cmp(const VB *vb, uint32_t x, uint32_t y)
{
    return strcmp(strset_str(&vb->syms, x), strset_str(&vb->syms, y));
}

/* 1 when x merges before y: the higher score (pc, or pc/(ca*cb) compared
 * as pc_x*ca_y*cb_y vs pc_y*ca_x*cb_x), then a, then b in byte order. */
static int heap_before(const VB *vb, const HeapEnt *x, const HeapEnt *y)
{
    if (vb->score == VOCAB_SCORE_FREQ) {
        if (x->pc != y->pc) return x->pc > y->pc;
    } else {
        unsigned __int128 l = (unsigned __int128)x->pc * y->ca * y->cb;
        unsigned __int128 r = (unsigned __int128)y->pc * x->ca * x->cb;
        if (l != r) return l > r;
    }
    const Pair *px = &vb->pair[x->pair], *py = &vb->pair[y->pair];
    int c = str_cmp(vb, px->a, py->a);
    if (c) return c < 0;
    return str_cmp(vb, px->b, py->b) < 0;
}

static void heap_down(VB *vb, size_t i)
{
    HeapEnt *h = vb->heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < vb->nheap && heap_before(vb, &h[l], &h[m])) m = l;
        if (r < vb->nheap && heap_before(vb, &h[r], &h[m])) m = r;
        if (m == i) return;
        HeapEnt t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static HeapEnt heap_ent(const VB *vb, uint32_t p)
{
    const Pair *q = &vb->pair[p];
    HeapEnt e = {q->count, vb->sym[q->a].count, vb->sym[q->b].count, p, q->ver};
    return e;
}

static int heap_push(VB *vb, uint32_t p)
{
    if (data_grow((void **)&vb->heap, &vb->heapcap, vb->nheap + 1, sizeof *vb->heap)) return -1;
    HeapEnt e = heap_ent(vb, p);
    size_t i = vb->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!heap_before(vb, &e, &vb->heap[up])) break;
        vb->heap[i] = vb->heap[up];
        i = up;
    }
    vb->heap[i] = e;
    return 0;
}

/* Rebuild from the live pairs: drops the stale entries. */
static int heap_rebuild(VB *vb)
{
    vb->nheap = 0;
    for (size_t p = 0; p < vb->npair; p++) {
        if (!vb->pair[p].count) continue;
        if (data_grow((void **)&vb->heap, &vb->heapcap, vb->nheap + 1, sizeof *vb->heap)) return -1;
        vb->heap[vb->nheap++] = heap_ent(vb, (uint32_t)p);
    }
    for (size_t i = vb->nheap / 2; i-- > 0;) heap_down(vb, i);
    return 0;
}

/* ---- merging ---------------------------------------------------------------- */

/* Replace every (a, b) in word w by ns, moving the neighbouring pair counts. */
static int merge_word(VB *vb, uint32_t w, uint32_t a, uint32_t b, uint32_t ns)
{
    uint32_t *s = vb->seq + vb->seq_off[w];
    uint32_t n = vb->seq_len[w];
    int64_t f = (int64_t)vb->wfreq[w];
    uint32_t i = 0;
    while (i + 1 < n) {
        if (s[i] != a || s[i + 1] != b) {
            i++;
            continue;
        }
        if (i > 0 && (pair_add(vb, s[i - 1], a, -f, w) || pair_add(vb, s[i - 1], ns, f, w)))
            return -1;
        if (i + 2 < n && (pair_add(vb, b, s[i + 2], -f, w) || pair_add(vb, ns, s[i + 2], f, w)))
            return -1;
        if (pair_add(vb, a, b, -f, w)) return -1;
        vb->sym[a].count -= (uint64_t)f;
        vb->sym[b].count -= (uint64_t)f;
        vb->sym[ns].count += (uint64_t)f;
        s[i] = ns;
        memmove(s + i + 1, s + i + 2, (n - i - 2) * sizeof *s);
        n--;
        i++;
    }
    vb->seq_len[w] = n;
    return 0;
}

/* Symbols and pairs of every word; the alphabet in both forms. */
static int vb_init_symbols(VB *vb, uint32_t *alphabet)
{
    size_t total = 0;
    for (uint32_t w = 0; w < vb->words.n; w++) total += vb->wnchars[w];
    vb->seq = malloc((total ? total : 1) * sizeof *vb->seq);
    vb->seq_off = malloc((vb->words.n + 1) * sizeof *vb->seq_off);
    vb->seq_len = malloc((vb->words.n + 1) * sizeof *vb->seq_len);
    vb->word_stamp = calloc(vb->words.n + 1, sizeof *vb->word_stamp);
    if (!vb->seq || !vb->seq_off || !vb->seq_len || !vb->word_stamp) return -1;
    /* The alphabet first, so that the character symbols hold ids 0..2A-1:
     * initial forms at even ids, "##" forms at odd ones. */
    StrSet chars = {0};
    for (uint32_t w = 0; w < vb->words.n; w++) {
        const char *s = strset_str(&vb->words, w);
        size_t len = vb->words.len[w];
        for (size_t k = 0; k < len;) {
            size_t c0 = k;
            uint32_t cp;
            utf8_next((const uint8_t *)s, len, &k, &cp);
            if (strset_get(&chars, s + c0, k - c0, 1, NULL) < 0) {
                strset_free(&chars);
                return -1;
            }
        }
    }
    uint32_t A = (uint32_t)chars.n;
    uint32_t *ord = malloc((A ? A : 1) * sizeof *ord);
    if (!ord) {
        strset_free(&chars);
        return -1;
    }
    for (uint32_t i = 0; i < A; i++) ord[i] = i;
    /* Shell sort by bytes (alphabets reach tens of thousands with CJK). */
    for (uint32_t gap = A / 2; gap > 0; gap /= 2)
        for (uint32_t i = gap; i < A; i++)
            for (uint32_t j = i; j >= gap && strcmp(strset_str(&chars, ord[j - gap]),
                                                    strset_str(&chars, ord[j])) > 0;
                 j -= gap) {
                uint32_t t = ord[j];
                ord[j] = ord[j - gap];
                ord[j - gap] = t;
            }
    int st = 0;
    for (uint32_t i = 0; i < A && !st; i++) {
        const char *c = strset_str(&chars, ord[i]);
        char buf[8] = "##";
        size_t l = strlen(c);
        memcpy(buf + 2, c, l);
        if (sym_get(vb, c, l, 0) != 2 * (int64_t)i ||
            sym_get(vb, buf, l + 2, 1) != 2 * (int64_t)i + 1)
            st = -1;
    }
    free(ord);
    strset_free(&chars);
    if (st) return -1;
    *alphabet = A;
    /* Sequences and the first pair counts. */
    size_t off = 0;
    for (uint32_t w = 0; w < vb->words.n; w++) {
        const char *s = strset_str(&vb->words, w);
        size_t len = vb->words.len[w];
        vb->seq_off[w] = off;
        uint32_t n = 0;
        for (size_t k = 0; k < len;) {
            size_t c0 = k;
            uint32_t cp;
            utf8_next((const uint8_t *)s, len, &k, &cp);
            char buf[8] = "##";
            memcpy(buf + 2, s + c0, k - c0);
            int64_t id = n ? sym_get(vb, buf, k - c0 + 2, 1) : sym_get(vb, s + c0, k - c0, 0);
            if (id < 0) return -1;
            vb->seq[off + n++] = (uint32_t)id;
            vb->sym[id].count += vb->wfreq[w];
        }
        vb->seq_len[w] = n;
        for (uint32_t k = 0; k + 1 < n; k++)
            if (pair_add(vb, vb->seq[off + k], vb->seq[off + k + 1], (int64_t)vb->wfreq[w], w))
                return -1;
        off += n;
    }
    return 0;
}

static void vb_free(VB *vb)
{
    strset_free(&vb->words);
    free(vb->wfreq);
    free(vb->wnchars);
    for (size_t i = 0; i < vb->syms.n; i++) free(vb->sym[i].adj);
    strset_free(&vb->syms);
    free(vb->sym);
    free(vb->seq);
    free(vb->seq_off);
    free(vb->seq_len);
    free(vb->word_stamp);
    for (size_t i = 0; i < vb->npair; i++) free(vb->pair[i].words);
    free(vb->pair);
    free(vb->pslots);
    free(vb->dirty);
    free(vb->dirty_stamp);
    free(vb->heap);
    memset(vb, 0, sizeof *vb);
}

/* Merge until *lines reaches size; *made collects the new symbols in order. */
static int vb_train(VB *vb, uint32_t *lines, uint32_t size, uint32_t **made, uint32_t *nmade,
                    uint32_t *merges)
{
    size_t madecap = 0;
    if (heap_rebuild(vb)) return -1;
    char *buf = NULL;
    size_t bufcap = 0;
    int st = 0;
    while (*lines < size && vb->nheap) {
        HeapEnt top = vb->heap[0];
        vb->heap[0] = vb->heap[--vb->nheap];
        heap_down(vb, 0);
        Pair *p = &vb->pair[top.pair];
        if (top.ver != p->ver || !p->count) continue;
        uint32_t a = p->a, b = p->b, pid = top.pair;
        /* the merged piece: a + b without its "##" */
        size_t la = vb->syms.len[a], lb = vb->syms.len[b] - 2;
        if (data_grow((void **)&buf, &bufcap, la + lb + 1, 1)) { st = -1; break; }
        memcpy(buf, strset_str(&vb->syms, a), la);
        memcpy(buf + la, strset_str(&vb->syms, b) + 2, lb);
        size_t before = vb->syms.n;
        int64_t ns = sym_get(vb, buf, la + lb, vb->sym[a].cont);
        if (ns < 0) { st = -1; break; }
        if (vb->syms.n > before) {
            if (data_grow((void **)made, &madecap, *nmade + 1, sizeof **made)) { st = -1; break; }
            (*made)[(*nmade)++] = (uint32_t)ns;
            (*lines)++;
        }
        vb->stamp++;
        vb->ndirty = 0;
        uint32_t *wl = p->words, nw = p->nw;
        p->words = NULL;
        p->nw = p->cw = 0;
        for (uint32_t k = 0; k < nw && !st; k++) {
            uint32_t w = wl[k];
            if (vb->word_stamp[w] == vb->stamp) continue;
            vb->word_stamp[w] = vb->stamp;
            st = merge_word(vb, w, a, b, (uint32_t)ns);
        }
        free(wl);
        /* Pairs whose score denominators changed. */
        uint32_t syms3[3] = {a, b, (uint32_t)ns};
        for (int k = 0; k < 3 && !st && vb->score == VOCAB_SCORE_LIKELIHOOD; k++)
            for (uint32_t j = 0; j < vb->sym[syms3[k]].nadj && !st; j++) {
                uint32_t q = vb->sym[syms3[k]].adj[j];
                if (vb->pair[q].count) st = mark_dirty(vb, q);
            }
        for (size_t k = 0; k < vb->ndirty && !st; k++) {
            uint32_t q = vb->dirty[k];
            vb->pair[q].ver++;
            if (vb->pair[q].count) st = heap_push(vb, q);
        }
        vb->pair[pid].ver++;
        (*merges)++;
        if (!st && vb->nheap > 4 * vb->npair + (1u << 20)) st = heap_rebuild(vb);
    }
    free(buf);
    return st;
}

static int write_vocab(const VB *vb, const char *out_path, uint32_t A, const uint32_t *made,
                       uint32_t nmade, char *err, size_t errlen)
{
    size_t l = strlen(out_path) + 16;
    char *tmp = malloc(l);
    if (!tmp) return ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory");
    snprintf(tmp, l, "%s.tmp", out_path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(tmp);
        return ct_fail(err, errlen, CORPUS_ERR_WRITE, "cannot write %s: %s", out_path,
                       strerror(e));
    }
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", f);
    for (uint32_t i = 0; i < A; i++) fprintf(f, "%s\n", strset_str(&vb->syms, 2 * i));
    for (uint32_t i = 0; i < A; i++) fprintf(f, "%s\n", strset_str(&vb->syms, 2 * i + 1));
    for (uint32_t i = 0; i < nmade; i++) fprintf(f, "%s\n", strset_str(&vb->syms, made[i]));
    int bad = ferror(f);
    bad |= fclose(f);
    if (bad || rename(tmp, out_path)) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return ct_fail(err, errlen, CORPUS_ERR_WRITE, "cannot write %s: %s", out_path,
                       strerror(e));
    }
    free(tmp);
    return 0;
}

int vocab_build_opts(const char *corpus_path, const VocabOpts *opts, const char *out_path,
                     VocabStats *stats, char *err, size_t errlen)
{
    VocabStats dummy;
    if (!stats) stats = &dummy;
    memset(stats, 0, sizeof *stats);
    int size = opts->size, mode = opts->mode;
    if (opts->score != VOCAB_SCORE_FREQ && opts->score != VOCAB_SCORE_LIKELIHOOD)
        return ct_fail(err, errlen, CORPUS_ERR_ARG, "unknown vocab score %d", opts->score);
    if (size < 6)
        return ct_fail(err, errlen, CORPUS_ERR_ARG, "vocab size %d is too small: the 5 "
                       "special tokens alone take 5 lines", size);
    if (data_check_output(out_path, "vocab", err, errlen)) return CORPUS_ERR_WRITE;
    CorpusFiles cf;
    int st = corpus_list(&cf, corpus_path, err, errlen);
    if (st) return st;
    VB vb;
    memset(&vb, 0, sizeof vb);
    vb.score = opts->score;
    BasicTok bt;
    basictok_init(&bt, mode);
    for (size_t i = 0; i < cf.n && !st; i++) {
        char *buf;
        size_t n;
        st = corpus_read(cf.files[i], cf.is_dir, &buf, &n, err, errlen);
        if (st == 1) {
            stats->binary_skipped++;
            st = 0;
            continue;
        }
        if (st) break;
        stats->files++;
        stats->bytes += n;
        char msg[256];
        if (opts->keep) {
            DocCount dc = {.vb = &vb, .bt = &bt, .opts = opts, .path = cf.files[i]};
            st = shard_split_docs(buf, n, SHARD_DOC_AUTO, &dc.fortune_file, count_doc, &dc);
            stats->dropped += dc.dropped;
            snprintf(msg, sizeof msg, "%s", dc.msg);
        } else {
            st = basictok_run(&bt, buf, n, count_word, &vb, msg, sizeof msg);
        }
        if (st) st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "%s: %s", cf.files[i], msg);
        free(buf);
    }
    basictok_free(&bt);
    if (!st && !stats->files)
        st = ct_fail(err, errlen, CORPUS_ERR_OPEN, "corpus %s holds no text files (%llu "
                     "binary files skipped)", corpus_path,
                     (unsigned long long)stats->binary_skipped);
    uint32_t A = 0, *made = NULL, nmade = 0, merges = 0;
    if (!st) {
        for (uint32_t w = 0; w < vb.words.n; w++) stats->words += vb.wfreq[w];
        stats->distinct_words = vb.words.n;
        stats->long_words = vb.long_words;
        if (vb_init_symbols(&vb, &A))
            st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory counting symbols");
    }
    stats->alphabet = A;
    if (!st && (uint64_t)5 + 2ull * A > (uint64_t)size)
        st = ct_fail(err, errlen, CORPUS_ERR_ARG,
                     "vocab size %d is too small for %s: its %u distinct characters, with "
                     "and without \"##\", and the 5 special tokens need %llu lines", size,
                     corpus_path, A, 5 + 2ull * A);
    uint32_t lines = 5 + 2 * A;
    if (!st && vb_train(&vb, &lines, (uint32_t)size, &made, &nmade, &merges))
        st = ct_fail(err, errlen, CORPUS_ERR_NOMEM, "out of memory merging pieces");
    if (!st) st = write_vocab(&vb, out_path, A, made, nmade, err, errlen);
    stats->merges = merges;
    stats->lines = st ? 0 : lines;
    free(made);
    vb_free(&vb);
    corpus_files_free(&cf);
    return st;
}

int vocab_build(const char *corpus_path, int size, int mode, const char *out_path,
                char *err, size_t errlen)
{
    VocabOpts o = {size, mode, VOCAB_SCORE_FREQ, NULL, NULL};
    return vocab_build_opts(corpus_path, &o, out_path, NULL, err, errlen);
}

const char *vocab_hint(char *buf, size_t buflen, int status, const VocabStats *stats)
{
    const char *h = corpus_hint(status);
    if (status != CORPUS_ERR_ARG)
        snprintf(buf, buflen, "%s", h ? h : "");
    else if (stats && stats->alphabet)
        snprintf(buf, buflen, "pass --size %llu or more", 5 + 2ull * stats->alphabet);
    else
        snprintf(buf, buflen, "pass a larger --size (BERT's is 30522)");
    return buf;
}
