/* libgobatch: the tables of the header that an attacher checks before it uses them (section 3.6
 * step 4): the names of tensors and counters, the job's counter table (2.5a, 2.8) and the batch
 * description (2.9). gb_open.c calls these; they call nothing of gb_open.c. */
#include "gb_internal.h"

#include <string.h>

static uint16_t ld16(const gb_ring *r, size_t off) { return *(const uint16_t *)(const void *)(r->base + off); }

int check_name(gb_ring *r, const unsigned char *field, size_t bytes, const char *what, uint32_t index, char *out) {
    size_t len = 0;
    while (len < bytes && field[len]) len++;
    if (len == 0 || len == bytes)
        return fail(r, GB_EPROTO, "corrupt gobatch ring: %s %u: name is %s", what, index, len ? "not NUL-terminated" : "empty");
    for (size_t k = 0; k < len; k++)
        if (!GB_TENSOR_NAME_CHAR(field[k]))
            return fail(r, GB_EPROTO, "corrupt gobatch ring: %s %u: name has byte 0x%02x at %zu (allowed: " GB_TENSOR_NAME_CHARS ")",
                        what, index, field[k], k);
    for (size_t k = len; k < bytes; k++)
        if (field[k]) return fail(r, GB_EPROTO, "corrupt gobatch ring: %s %u: name padding is not NUL", what, index);
    memcpy(out, field, len);
    out[len] = 0;
    return GB_OK;
}

/* Section 3.6 step 4 for the counter table, after the acquire load of READY (the creator
 * wrote it before): every descriptor below counter_count has a name, a known kind and scope,
 * the width of its scope, and the values after the previous descriptor's, inside the array.
 * Copies the table into r (its values are read by gb_counter_get). */
int check_counters(gb_ring *r) {
#define BAD(...) fail(r, GB_EPROTO, "corrupt gobatch ring: " __VA_ARGS__)
    uint32_t n = ld32(r, GB_H_COUNTER_COUNT);
    if (n > GB_MAX_COUNTERS) return BAD("counter_count %u (must be 0 .. %u)", n, GB_MAX_COUNTERS);
    uint32_t next = 0;
    for (uint32_t k = 0; k < n; k++) {
        const unsigned char *d = r->base + COUNTER_FIELD(k, GB_C_NAME);
        gb_counter *c = &r->counters[k];
        memset(c, 0, sizeof *c);
        int rc = check_name(r, d, GB_COUNTER_NAME_BYTES, "counter", k, c->name);
        if (rc != GB_OK) return rc;
        for (uint32_t u = 0; u < k; u++)
            if (strcmp(r->counters[u].name, c->name) == 0) return BAD("counter %u: name '%s' repeats counter %u", k, c->name, u);
        c->kind = ld16(r, COUNTER_FIELD(k, GB_C_KIND));
        c->scope = ld16(r, COUNTER_FIELD(k, GB_C_SCOPE));
        c->width = ld16(r, COUNTER_FIELD(k, GB_C_WIDTH));
        uint32_t first = ld16(r, COUNTER_FIELD(k, GB_C_FIRST));
        if (c->kind != GB_COUNTER_KIND_COUNTER && c->kind != GB_COUNTER_KIND_GAUGE)
            return BAD("counter '%s': kind %u (must be %u or %u)", c->name, c->kind, GB_COUNTER_KIND_COUNTER,
                       GB_COUNTER_KIND_GAUGE);
        if (c->scope != GB_SCOPE_JOB && c->scope != GB_SCOPE_SOURCE)
            return BAD("counter '%s': scope %u (must be %u or %u)", c->name, c->scope, GB_SCOPE_JOB, GB_SCOPE_SOURCE);
        if (c->width != (c->scope == GB_SCOPE_JOB ? 1u : GB_MAX_COUNTER_SOURCES))
            return BAD("counter '%s': width %u for scope %u", c->name, c->width, c->scope);
        if (first != next || first + c->width > GB_MAX_COUNTER_VALUES)
            return BAD("counter '%s': values %u .. %u (must start at %u and end within %u)", c->name, first,
                       first + c->width - 1, next, GB_MAX_COUNTER_VALUES);
        r->counter_first[k] = first;
        next = first + c->width;
    }
    r->g.counter_count = n;
    return GB_OK;
#undef BAD
}

/* Section 3.6 step 4 for the batch description (2.9): description_len within its region and the
 * bytes UTF-8 (the JSON itself is the Python side's to check, with the member at fault named). */
int check_description(gb_ring *r) {
    uint32_t n = ld32(r, GB_H_DESCRIPTION_LEN);
    if (n > GB_MAX_DESCRIPTION)
        return fail(r, GB_EPROTO, "corrupt gobatch ring: description_len %u (must be 0 .. %u)", n, GB_MAX_DESCRIPTION);
    const unsigned char *s = r->base + GB_H_DESCRIPTION;
    for (uint32_t i = 0; i < n;) {
        unsigned char c = s[i];
        uint32_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (uint32_t k = 1; ok && k < len; k++) ok = (s[i + k] & 0xc0) == 0x80;
        if (!ok) return fail(r, GB_EPROTO, "corrupt gobatch ring: description: byte %u is not UTF-8", i);
        i += len;
    }
    r->g.description_len = n;
    return GB_OK;
}

int gb_description_get(const gb_ring *r, char *out, size_t cap) {
    if (!r || !r->ready) return GB_ECLOSED;
    uint32_t n = r->g.description_len;
    if (cap < n) return GB_ECLOSED;
    memcpy(out, r->base + GB_H_DESCRIPTION, n);
    return (int)n;
}
