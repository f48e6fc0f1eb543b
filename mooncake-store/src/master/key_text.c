/* How the master shows a key (or a segment name) in text: JSON documents, Prometheus labels and
 * line-per-key lists want UTF-8 and no stray line breaks, while keys are any bytes. A leaf that
 * the admin views and the metrics share, so neither has to reach into the other for it. */
#include <string.h>

#include "master/master_internal.h"

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when there is none. */
static size_t mc__utf8_seq(const uint8_t *p, size_t n, int ctl) {
    uint8_t c = p[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (ctl && (c < 0x20 || c == 0x7F))
        return 0;
    if (c >= 0x01 && c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
        hi = c == 0xED ? 0x9F : 0xBF; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (len > n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return len;
}

/* JSON and label text must be UTF-8, keys are bytes: valid UTF-8 passes unchanged, any other
 * byte (NUL too) becomes the four characters \xNN, so a binary key stays visible and the
 * document valid. Line-per-key lists (ctl) escape control characters the same way, so a key
 * with a newline in it is still one line. */
void mc__key_text(const uint8_t *p, size_t n, char *out, int ctl) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = mc__utf8_seq(p + i, n - i, ctl);
        if (k) {
            memcpy(out + o, p + i, k);
            o += k;
            i += k;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 15];
            i++;
        }
    }
    out[o] = '\0';
}
