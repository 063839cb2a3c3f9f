/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/text.h"
#include "tools/manual.h"

#define TEXT_INDENT 4
#define TAG_COLUMN 20 /* where an item's text starts in MAN_TEXT */
#define TEXT_DEFAULT_WIDTH 80

enum { LAST_NONE, LAST_HEADING, LAST_BLOCK, LAST_ITEM };

int tool_term_width(void)
{
    const char *cols = getenv("COLUMNS");
    struct winsize ws;

    if (cols != NULL && *cols != '\0' && strspn(cols, "0123456789") == strlen(cols) &&
        atoi(cols) > 0)
        return atoi(cols);
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

/* Breaks the line before a word that would pass `width` (never at the start of a line). */
static int wrap_before(FILE *out, int col, int len, int indent, int width)
{
    if (width > 0 && col > indent && col + len > width) {
        fprintf(out, "\n%*s", indent, "");
        return indent;
    }
    return col;
}

char *tool_text_dup(const char *s)
{
    size_t len = strlen(s), need = recap__text_escaped_len(s, len);
    char *buf = malloc(need + 1);

    if (buf != NULL)
        recap__text_escape(buf, need + 1, s, len, NULL);
    return buf;
}

void tool_text(FILE *out, const char *s)
{
    char *e = tool_text_dup(s);

    fputs(e != NULL ? e : "(out of memory)", out);
    free(e);
}

void tool_wrap(FILE *out, const char *text, int col, int indent, int width)
{
    char *escaped = tool_text_dup(text);
    const char *p = escaped != NULL ? escaped : "(out of memory)";
    int len = (int)strcspn(p, " ");

    col = wrap_before(out, col, len, indent, width);
    while (*p != '\0') {
        fprintf(out, "%.*s", len, p);
        col += len;
        p += len;
        if (*p != ' ')
            continue;
        p++;
        len = (int)strcspn(p, " ");
        if (*p == '\0')
            break;
        col = wrap_before(out, col, len + 1, indent, width);
        if (col > indent) {
            fputc(' ', out);
            col++;
        }
    }
    fputc('\n', out);
    free(escaped);
}

/* Text for roff: backslashes and hyphens escaped (a '-' would print as a hyphen, not the minus
 * options start with), and a line that starts with '.' or '\'' kept from being a request. */
static void roff_escape(FILE *out, const char *s)
{
    int line_start = 1;

    for (; *s != '\0'; s++) {
        if (line_start && (*s == '.' || *s == '\''))
            fputs("\\&", out);
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
        line_start = *s == '\n';
    }
}

static void roff_text(FILE *out, const char *s)
{
    roff_escape(out, s);
    fputc('\n', out);
}

/* A blank line between text blocks, none right after a heading. */
static void text_space(man_t *m, int next)
{
    if (m->last == LAST_BLOCK || (m->last == LAST_ITEM && next != LAST_ITEM))
        fputc('\n', m->out);
    m->last = next;
}

void man_begin(man_t *m, FILE *out, man_format_t format, const char *name, const char *section,
               const char *version, const char *summary)
{
    char upper[64];
    size_t i;

    m->out = out;
    m->format = format;
    m->width = tool_term_width();
    if (m->width == 0)
        m->width = TEXT_DEFAULT_WIDTH;
    for (i = 0; name[i] != '\0' && i + 1 < sizeof(upper); i++)
        upper[i] = (char)toupper((unsigned char)name[i]);
    upper[i] = '\0';
    if (format == MAN_ROFF)
        fprintf(out, ".TH %s %s \"\" \"recap %s\" \"recap manual\"\n", upper, section, version);
    else
        fprintf(out, "%s(%s)\n", upper, section);
    man_section(m, "NAME");
    if (format == MAN_ROFF) {
        fprintf(out, "%s \\- ", name);
        roff_text(out, summary);
    } else {
        fprintf(out, "%*s%s - ", TEXT_INDENT, "", name);
        tool_wrap(out, summary, TEXT_INDENT + (int)strlen(name) + 3, TEXT_INDENT, m->width);
    }
    m->last = LAST_BLOCK;
}

void man_section(man_t *m, const char *title)
{
    if (m->format == MAN_ROFF)
        fprintf(m->out, ".SH %s\n", title);
    else
        fprintf(m->out, "\n%s\n", title);
    m->last = LAST_HEADING;
}

void man_para(man_t *m, const char *text)
{
    if (m->format == MAN_ROFF) {
        fputs(".PP\n", m->out);
        roff_text(m->out, text);
        return;
    }
    text_space(m, LAST_BLOCK);
    fprintf(m->out, "%*s", TEXT_INDENT, "");
    tool_wrap(m->out, text, TEXT_INDENT, TEXT_INDENT, m->width);
}

void man_lines(man_t *m, const char *text)
{
    const char *p = text;

    if (m->format == MAN_ROFF) {
        fputs(".PP\n.nf\n", m->out);
        roff_text(m->out, text);
        fputs(".fi\n", m->out);
        return;
    }
    text_space(m, LAST_BLOCK);
    while (*p != '\0') {
        int len = (int)strcspn(p, "\n");

        fprintf(m->out, "%*s%.*s\n", TEXT_INDENT, "", len, p);
        p += len + (p[len] == '\n');
    }
}

void man_item(man_t *m, const char *tag, const char *text)
{
    int taglen = (int)strlen(tag);

    if (m->format == MAN_ROFF) {
        fputs(".TP\n\\fB", m->out); /* the tag in bold */
        roff_escape(m->out, tag);
        fputs("\\fR\n", m->out);
        roff_text(m->out, text);
        return;
    }
    text_space(m, LAST_ITEM);
    if (TEXT_INDENT + taglen + 2 > TAG_COLUMN)
        fprintf(m->out, "%*s%s\n%*s", TEXT_INDENT, "", tag, TAG_COLUMN, "");
    else
        fprintf(m->out, "%*s%-*s", TEXT_INDENT, "", TAG_COLUMN - TEXT_INDENT, tag);
    tool_wrap(m->out, text, TAG_COLUMN, TAG_COLUMN, m->width);
}
