/* The HTML page around a report: escaping, head with the inline CSS, end.
 * See svg.h. */
#include "reports/write/svg.h"

#include <string.h>

#include "reports/write/utf8.h"

int ca_html_escape_n(FILE *f, const char *str, size_t n)
{
    if (!f)
        return -1;
    if (!str)
        return 0;
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ca_utf8_decode(s + i, n - i, &cp);
        const char *rep = NULL;
        switch (cp) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default:
            if ((k == 1 && s[i] >= 0x80) || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') ||
                cp == 0xFFFE || cp == 0xFFFF)
                rep = "\xEF\xBF\xBD";   /* U+FFFD: XML allows no escape for these */
        }
        if (rep) {
            if (run)
                fwrite(s + i - run, 1, run, f);
            run = 0;
            fputs(rep, f);
        } else {
            run += k;
        }
        i += k;
    }
    if (run)
        fwrite(s + n - run, 1, run, f);
    return ferror(f) ? -1 : 0;
}

int ca_html_escape(FILE *f, const char *s)
{
    return ca_html_escape_n(f, s, s ? strlen(s) : 0);
}

/* The abbreviations the reports' prose uses, and what each stands for (the
 * units, on every line, are said once under the page). */
static const struct {
    const char *abbr, *title;
} ABBRS[] = {
    {"OOM", "out of memory: an allocation that failed after every retry"},
    {"CUPTI", "CUDA Profiling Tools Interface: NVIDIA's library through which cudalloc sees device memory "
              "allocated past it"},
    {"NVTX", "NVIDIA Tools Extension: the ranges a program marks (torch.cuda.nvtx.range_push)"},
    {"RMM", "RAPIDS Memory Manager, whose CSV trace format cudalloc writes and reads"},
    {"bf16", "bfloat16: 16-bit floating point with float32's range"},
    {"fp16", "16-bit floating point (half precision)"},
    {"fp32", "32-bit floating point (single precision)"},
    {"e.g.", "for example"},
};

static int word_char(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_'; }

int ca_html_text(FILE *f, const char *s)
{
    if (!f)
        return -1;
    if (!s)
        return 0;
    size_t n = strlen(s), from = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && word_char((unsigned char)s[i - 1]))
            continue;
        for (size_t k = 0; k < sizeof ABBRS / sizeof ABBRS[0]; k++) {
            size_t len = strlen(ABBRS[k].abbr);
            if (strncmp(s + i, ABBRS[k].abbr, len) || word_char((unsigned char)s[i + len]))
                continue;
            ca_html_escape_n(f, s + from, i - from);
            fputs("<abbr title=\"", f);
            ca_html_escape(f, ABBRS[k].title);
            fputs("\">", f);
            ca_html_escape_n(f, s + i, len);
            fputs("</abbr>", f);
            from = i + len;
            i = from - 1;
            break;
        }
    }
    ca_html_escape_n(f, s + from, n - from);
    return ferror(f) ? -1 : 0;
}

int ca_html_begin(FILE *f, const char *title)
{
    if (!f)
        return -1;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    ca_html_escape(f, title ? title : "cudalloc report");
    fputs("</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}\n"
          "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
          "table{border-collapse:collapse;font-size:0.9em}\n"
          "th,td{border:1px solid #ccc;padding:0.25em 0.5em;text-align:left;vertical-align:top}\n"
          "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
          "pre{font-size:0.85em;white-space:pre-wrap}\n"
          "svg{display:block;margin:0.5em 0}\n"
          ".verdict{padding:0.6em 0.9em;border-left:5px solid #888;background:#f4f4f4}\n"
          ".verdict.bad{border-color:#d62728;background:#fcf0f0}.verdict.good{border-color:#2ca02c;background:#eff8ef}\n"
          ".finding{border:1px solid #ccc;border-radius:4px;padding:0.1em 0.9em 0.6em;margin:0.8em 0}\n"
          ".finding h3{font-size:1.05em}.advice{background:#fff8e0;padding:0.4em 0.6em}\n"
          ".note{color:#555;font-size:0.85em;max-width:960px}.chart{position:relative}\n"
          ".hover-tip{position:absolute;z-index:1;margin:0;padding:0.4em 0.6em;background:#fff;border:1px solid #888;"
          "box-shadow:0 1px 4px rgba(0,0,0,0.25);pointer-events:none;font-size:0.8em;max-width:640px}\n"
          "</style>\n</head>\n<body>\n",
          f);
    return ferror(f) ? -1 : 0;
}

int ca_html_end(FILE *f)
{
    if (!f)
        return -1;
    fputs("</body>\n</html>\n", f);
    return ferror(f) ? -1 : 0;
}
