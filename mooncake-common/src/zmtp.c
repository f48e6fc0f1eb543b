/* ZMTP 3.x codec (mooncake/common/zmtp.h): greeting, frames, commands. No I/O. */
#include "mooncake/common/zmtp.h"

#include <string.h>
#include <strings.h>

#include "mooncake/error.h"

void mc__zmtp_greeting(uint8_t out[MC_ZMTP_GREETING_SIZE], int as_server) {
    memset(out, 0, MC_ZMTP_GREETING_SIZE);
    out[0] = 0xff;
    out[9] = 0x7f;
    out[10] = 3; /* major */
    out[11] = 1; /* minor */
    memcpy(out + 12, "NULL", 4);
    out[32] = as_server ? 1 : 0;
}

int mc__zmtp_greeting_parse(const uint8_t in[MC_ZMTP_GREETING_SIZE], int *minor) {
    static const uint8_t null_mech[20] = {'N', 'U', 'L', 'L'};
    /* bytes 1..8 are padding a 3.x peer may fill (older ZMTP put a length there): not checked */
    if (in[0] != 0xff || (in[9] & 1) != 1 || in[10] < 3)
        return MC_ERR_INVALID_ARGUMENT;
    if (memcmp(in + 12, null_mech, sizeof(null_mech)) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    *minor = in[10] > 3 ? 1 : in[11];
    return 0;
}

int64_t mc__zmtp_frame_parse(const uint8_t *in, size_t n, uint64_t max_body, mc_zmtp_frame_t *f) {
    size_t head;
    uint64_t len = 0;
    if (n < 2)
        return 0;
    f->flags = in[0];
    if (in[0] & ~(MC_ZMTP_F_MORE | MC_ZMTP_F_LONG | MC_ZMTP_F_COMMAND))
        return MC_ERR_INVALID_ARGUMENT;
    /* a command is never part of a multipart message */
    if ((in[0] & MC_ZMTP_F_COMMAND) && (in[0] & MC_ZMTP_F_MORE))
        return MC_ERR_INVALID_ARGUMENT;
    if (in[0] & MC_ZMTP_F_LONG) {
        if (n < 9)
            return 0;
        for (int i = 1; i <= 8; i++)
            len = (len << 8) | in[i];
        head = 9;
    } else {
        len = in[1];
        head = 2;
    }
    if (len > max_body)
        return MC_ERR_INVALID_ARGUMENT;
    if (n - head < len)
        return 0;
    f->body = in + head;
    f->len = len;
    return (int64_t)(head + len);
}

void mc__zmtp_frame_put(mc_buf_t *b, uint8_t flags, const void *body, size_t len) {
    uint8_t head[9];
    size_t hn;
    flags &= MC_ZMTP_F_MORE | MC_ZMTP_F_COMMAND;
    if (len > 255) {
        head[0] = flags | MC_ZMTP_F_LONG;
        for (int i = 0; i < 8; i++)
            head[1 + i] = (uint8_t)((uint64_t)len >> (8 * (7 - i)));
        hn = 9;
    } else {
        head[0] = flags;
        head[1] = (uint8_t)len;
        hn = 2;
    }
    mc__buf_put(b, head, hn);
    if (len)
        mc__buf_put(b, body, len);
}

void mc__zmtp_command_put(mc_buf_t *b, const char *name, const void *data, size_t len) {
    size_t nl = strlen(name);
    mc_buf_t body;
    mc__buf_init(&body);
    mc__buf_u8(&body, (uint8_t)nl);
    mc__buf_put(&body, name, nl);
    if (len)
        mc__buf_put(&body, data, len);
    if (body.failed)
        b->failed = 1;
    else
        mc__zmtp_frame_put(b, MC_ZMTP_F_COMMAND, body.data, body.len);
    mc__buf_free(&body);
}

static void property(mc_buf_t *b, const char *name, const char *value) {
    size_t nl = strlen(name), vl = strlen(value);
    uint8_t be[4] = {(uint8_t)(vl >> 24), (uint8_t)(vl >> 16), (uint8_t)(vl >> 8), (uint8_t)vl};
    mc__buf_u8(b, (uint8_t)nl);
    mc__buf_put(b, name, nl);
    mc__buf_put(b, be, 4);
    mc__buf_put(b, value, vl);
}

void mc__zmtp_ready_put(mc_buf_t *b, const char *socket_type) {
    mc_buf_t props;
    mc__buf_init(&props);
    property(&props, "Socket-Type", socket_type);
    if (!strcmp(socket_type, "DEALER") || !strcmp(socket_type, "REQ") ||
        !strcmp(socket_type, "ROUTER"))
        property(&props, "Identity", "");
    if (props.failed)
        b->failed = 1;
    else
        mc__zmtp_command_put(b, "READY", props.data, props.len);
    mc__buf_free(&props);
}

int mc__zmtp_command_parse(const mc_zmtp_frame_t *f, const uint8_t **name, size_t *name_len,
                           const uint8_t **data, size_t *data_len) {
    if (!(f->flags & MC_ZMTP_F_COMMAND) || f->len < 1 || (uint64_t)f->body[0] + 1 > f->len)
        return MC_ERR_INVALID_ARGUMENT;
    *name = f->body + 1;
    *name_len = f->body[0];
    *data = f->body + 1 + f->body[0];
    *data_len = (size_t)(f->len - 1 - f->body[0]);
    return 0;
}

int mc__zmtp_command_is(const uint8_t *name, size_t name_len, const char *want) {
    return name_len == strlen(want) && memcmp(name, want, name_len) == 0;
}

int mc__zmtp_ready_socket_type(const uint8_t *data, size_t len, char *out, size_t cap) {
    const uint8_t *p = data, *end = data + len;
    int found = 0;
    while (p < end) {
        size_t nl = *p++;
        uint64_t vl;
        if ((size_t)(end - p) < nl + 4)
            return MC_ERR_INVALID_ARGUMENT;
        const uint8_t *name = p;
        p += nl;
        vl = ((uint64_t)p[0] << 24) | ((uint64_t)p[1] << 16) | ((uint64_t)p[2] << 8) | p[3];
        p += 4;
        if ((uint64_t)(end - p) < vl)
            return MC_ERR_INVALID_ARGUMENT;
        /* property names are case-insensitive */
        if (nl == 11 && strncasecmp((const char *)name, "Socket-Type", 11) == 0) {
            if (vl + 1 > cap)
                return MC_ERR_INVALID_ARGUMENT;
            memcpy(out, p, vl);
            out[vl] = 0;
            found = 1;
        }
        p += vl;
    }
    return found ? 0 : MC_ERR_INVALID_ARGUMENT;
}

int mc__zmtp_compatible(const char *mine, const char *peer) {
    static const char *const pairs[][2] = {
        {"PUB", "SUB"},       {"PUB", "XSUB"},      {"XPUB", "SUB"},      {"XPUB", "XSUB"},
        {"SUB", "PUB"},       {"SUB", "XPUB"},      {"XSUB", "PUB"},      {"XSUB", "XPUB"},
        {"ROUTER", "DEALER"}, {"ROUTER", "REQ"},    {"ROUTER", "ROUTER"}, {"DEALER", "ROUTER"},
        {"DEALER", "REP"},    {"DEALER", "DEALER"}, {"REQ", "ROUTER"},    {"REQ", "REP"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        if (!strcmp(pairs[i][0], mine) && !strcmp(pairs[i][1], peer))
            return 1;
    return 0;
}

void mc__zmtp_stream_init(mc_zmtp_stream_t *st, const char *mine, uint64_t max_msg) {
    memset(st, 0, sizeof(*st));
    st->mine = mine;
    st->max_msg = max_msg;
}

int64_t mc__zmtp_stream_next(mc_zmtp_stream_t *st, const uint8_t *in, size_t n, int *ev,
                             mc_zmtp_msg_t *m, const uint8_t **cmd, size_t *cmd_len,
                             const uint8_t **data, size_t *data_len) {
    mc_zmtp_frame_t f;
    int64_t used;
    size_t off = 0, total = 0;
    *ev = MC_ZMTP_EV_NONE;
    if (st->state == 0) {
        if (n < MC_ZMTP_GREETING_SIZE)
            return 0;
        if (mc__zmtp_greeting_parse(in, &st->minor) != 0)
            return MC_ERR_INVALID_ARGUMENT;
        st->state = 1;
        return MC_ZMTP_GREETING_SIZE;
    }
    used = mc__zmtp_frame_parse(in, n, st->max_msg, &f);
    if (used <= 0)
        return used;
    if (f.flags & MC_ZMTP_F_COMMAND) {
        if (mc__zmtp_command_parse(&f, cmd, cmd_len, data, data_len) != 0)
            return MC_ERR_INVALID_ARGUMENT;
        if (st->state == 1) {
            /* the first command must be READY naming a type we may talk to */
            if (!mc__zmtp_command_is(*cmd, *cmd_len, "READY") ||
                mc__zmtp_ready_socket_type(*data, *data_len, st->peer_type,
                                           sizeof(st->peer_type)) != 0 ||
                !mc__zmtp_compatible(st->mine, st->peer_type))
                return MC_ERR_INVALID_ARGUMENT;
            st->state = 2;
            *ev = MC_ZMTP_EV_READY;
            return used;
        }
        *ev = MC_ZMTP_EV_CMD;
        return used;
    }
    if (st->state != 2)
        return MC_ERR_INVALID_ARGUMENT;
    /* a message: every frame up to the one without MORE, all present before any is consumed */
    m->nparts = 0;
    for (;;) {
        used = mc__zmtp_frame_parse(in + off, n - off, st->max_msg, &f);
        if (used <= 0)
            return used;
        if ((f.flags & MC_ZMTP_F_COMMAND) || m->nparts == MC_ZMTP_MAX_PARTS)
            return MC_ERR_INVALID_ARGUMENT;
        total += f.len;
        if (total > st->max_msg)
            return MC_ERR_INVALID_ARGUMENT;
        m->part[m->nparts] = f.body;
        m->len[m->nparts++] = (size_t)f.len;
        off += (size_t)used;
        if (!(f.flags & MC_ZMTP_F_MORE))
            break;
    }
    *ev = MC_ZMTP_EV_MSG;
    return (int64_t)off;
}
