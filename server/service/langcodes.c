/*
 * langcodes.c - LibreTranslate's codes, FLORES-200's and English names
 * (langcodes.h). The FLORES-200 column follows NLLB-200's language list
 * (transformers' tokenization_nllb FAIRSEQ_LANGUAGE_CODES); where a short
 * code covers several of NLLB's languages the table names the one NLLB's
 * own evaluations use for it (ar: Modern Standard Arabic arb_Arab, fa:
 * Western Persian pes_Arab, ms: Standard Malay zsm_Latn, az: North
 * Azerbaijani azj_Latn, sq: Tosk Albanian als_Latn, lv: Standard Latvian
 * lvs_Latn, zt: LibreTranslate's traditional Chinese).
 */
#include <stdio.h>
#include <string.h>

#include "langcodes.h"

typedef struct lang_row {
    const char *code, *flores, *name;
} lang_row;

static const lang_row k_langs[] = {
    {"en", "eng_Latn", "English"},    {"de", "deu_Latn", "German"},
    {"fr", "fra_Latn", "French"},     {"es", "spa_Latn", "Spanish"},
    {"it", "ita_Latn", "Italian"},    {"pt", "por_Latn", "Portuguese"},
    {"nl", "nld_Latn", "Dutch"},      {"ru", "rus_Cyrl", "Russian"},
    {"zh", "zho_Hans", "Chinese"},    {"zt", "zho_Hant", "Chinese (traditional)"},
    {"ja", "jpn_Jpan", "Japanese"},   {"ar", "arb_Arab", "Arabic"},
    {"pl", "pol_Latn", "Polish"},     {"sv", "swe_Latn", "Swedish"},
    {"cs", "ces_Latn", "Czech"},      {"fi", "fin_Latn", "Finnish"},
    {"uk", "ukr_Cyrl", "Ukrainian"},  {"da", "dan_Latn", "Danish"},
    {"el", "ell_Grek", "Greek"},      {"hu", "hun_Latn", "Hungarian"},
    {"ro", "ron_Latn", "Romanian"},   {"tr", "tur_Latn", "Turkish"},
    {"ko", "kor_Hang", "Korean"},     {"hi", "hin_Deva", "Hindi"},
    {"nb", "nob_Latn", "Norwegian"},  {"az", "azj_Latn", "Azerbaijani"},
    {"bg", "bul_Cyrl", "Bulgarian"},  {"bn", "ben_Beng", "Bengali"},
    {"ca", "cat_Latn", "Catalan"},    {"eo", "epo_Latn", "Esperanto"},
    {"et", "est_Latn", "Estonian"},   {"eu", "eus_Latn", "Basque"},
    {"fa", "pes_Arab", "Persian"},    {"ga", "gle_Latn", "Irish"},
    {"gl", "glg_Latn", "Galician"},   {"he", "heb_Hebr", "Hebrew"},
    {"id", "ind_Latn", "Indonesian"}, {"ky", "kir_Cyrl", "Kyrgyz"},
    {"lt", "lit_Latn", "Lithuanian"}, {"lv", "lvs_Latn", "Latvian"},
    {"ms", "zsm_Latn", "Malay"},      {"sk", "slk_Latn", "Slovak"},
    {"sl", "slv_Latn", "Slovenian"},  {"sq", "als_Latn", "Albanian"},
    {"sr", "srp_Cyrl", "Serbian"},    {"th", "tha_Thai", "Thai"},
    {"tl", "tgl_Latn", "Tagalog"},    {"ur", "urd_Arab", "Urdu"},
    {"vi", "vie_Latn", "Vietnamese"}, {"hr", "hrv_Latn", "Croatian"},
    {"bs", "bos_Latn", "Bosnian"},    {"mk", "mkd_Cyrl", "Macedonian"},
    {"be", "bel_Cyrl", "Belarusian"}, {"ka", "kat_Geor", "Georgian"},
    {"hy", "hye_Armn", "Armenian"},   {"sw", "swh_Latn", "Swahili"},
    {"ta", "tam_Taml", "Tamil"},      {"te", "tel_Telu", "Telugu"},
    {"mr", "mar_Deva", "Marathi"},    {"af", "afr_Latn", "Afrikaans"},
    {"is", "isl_Latn", "Icelandic"},  {"cy", "cym_Latn", "Welsh"},
    {"kk", "kaz_Cyrl", "Kazakh"},     {"pa", "pan_Guru", "Punjabi"},
};

#define N_LANGS ((int)(sizeof k_langs / sizeof k_langs[0]))

const char *srv_lang_flores(const char *code)
{
    for (int i = 0; i < N_LANGS; i++)
        if (!strcmp(k_langs[i].code, code))
            return k_langs[i].flores;
    return NULL;
}

const char *srv_lang_short(const char *code)
{
    for (int i = 0; i < N_LANGS; i++)
        if (!strcmp(k_langs[i].flores, code))
            return k_langs[i].code;
    return NULL;
}

void srv_lang_canon(const char *code, char *out, size_t n)
{
    const char *s = srv_lang_short(code);
    snprintf(out, n, "%s", s ? s : code);
}

int srv_lang_same(const char *a, const char *b)
{
    char ca[32], cb[32];
    srv_lang_canon(a, ca, sizeof ca);
    srv_lang_canon(b, cb, sizeof cb);
    return !strcmp(ca, cb);
}

const char *srv_lang_name(const char *code)
{
    for (int i = 0; i < N_LANGS; i++)
        if (!strcmp(k_langs[i].code, code) || !strcmp(k_langs[i].flores, code))
            return k_langs[i].name;
    return code;
}

int srv_lang_table_size(void)
{
    return N_LANGS;
}

const char *srv_lang_table_code(int i)
{
    return i >= 0 && i < N_LANGS ? k_langs[i].code : NULL;
}

int srv_lang_in_tok(const td_tokenizer *tok, const char *code)
{
    if (!tok || !code || !*code || td_tok_n_langs(tok) == 0)
        return -1;
    int l = td_tok_lang_find(tok, code);
    const char *f = srv_lang_flores(code), *sh = srv_lang_short(code);
    if (l < 0 && f)
        l = td_tok_lang_find(tok, f);
    if (l < 0 && sh)
        l = td_tok_lang_find(tok, sh);
    return l;
}
