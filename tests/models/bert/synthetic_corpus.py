"""A seeded, generated (never downloaded) corpus of varied sentences for the
BERT tokenizer tests: ASCII words, mixed case, accented Latin, CJK, emoji,
punctuation runs, very long words and whitespace oddities."""

import random

_SYLLABLES = [
    "the", "un", "re", "ing", "tion", "al", "er", "pre", "token", "iza", "word", "piece",
    "bert", "ber", "ly", "ment", "s", "ed", "trans", "form", "at", "ion", "ca", "fe", "na",
    "over", "sub", "ous", "ness", "qu", "ick", "zz", "x", "an", "or", "is", "it", "to",
]
_ACCENTED = [
    "café", "Café", "naïve", "über", "Über", "mañana", "façade", "Ångström", "crème", "brûlée",
    "résumé", "Zürich", "São", "Paulo", "jalapeño", "Æsir", "smørrebrød", "Łódź", "İstanbul",
    "straße", "Ελλάδα", "ΣΟΦΟΣ", "Москва", "ÉCOLE", "ÑANDÚ", "coöperate", "Dvořák", "Ǆemal",
]
_CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴于ひらがなカタカナ한국어漢字"
_EMOJI = ["😀", "🎉", "👍🏽", "🇫🇷", "👨‍👩‍👧", "❤️", "🤖", "☃", "✨", "🍣"]
_PUNCT = [".", ",", "!", "?", "...", "!!!", "?!", ";", ":", "—", "–", "(", ")", "[", "]", "«", "»",
          "“", "”", "'", '"', "#", "$", "%", "&", "*", "@", "^", "_", "`", "~", "|", "\\", "/",
          "¿", "¡", "…", "§", "©", "®", "€", "£", "¥", "+", "=", "<", ">", "{", "}", "·", "°"]
_SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u200b", "\u3000", "\u2009", "\u202f"]
_ODD = ["\u200d", "\ufeff", "\u00ad", "\x00", "\x07", "\ufffd", "\u0301", "ﬁ", "²", "Ｗｉｄｅ", "①",
        "\U000e0041", "\u2028", "\x85", "\u0130", "ß", "ǅ", "ﬀ", "K", "Å"]


def _word(rng):
    kind = rng.random()
    if kind < 0.55:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))
        case = rng.random()
        if case < 0.15:
            word = word.capitalize()
        elif case < 0.2:
            word = word.upper()
        elif case < 0.23:
            word = "".join(c.upper() if rng.random() < 0.5 else c for c in word)
        return word
    if kind < 0.7:
        return rng.choice(_ACCENTED)
    if kind < 0.8:
        return "".join(rng.choice(_CJK) for _ in range(rng.randint(1, 6)))
    if kind < 0.85:
        return rng.choice(_EMOJI) * rng.randint(1, 3)
    if kind < 0.93:
        return "".join(rng.choice(_PUNCT) for _ in range(rng.randint(1, 4)))
    if kind < 0.96:
        return rng.choice(_ODD)
    if kind < 0.98:
        return str(rng.randint(0, 10**rng.randint(1, 9)))
    # Very long words, ASCII or accented, around the 100-character WordPiece limit.
    base = rng.choice(["a", "ab", "é", "xyz", "ü", "字"])
    return base * rng.randint(30, 130)


def make_corpus(num_sentences=10_000, seed=0):
    """`num_sentences` generated sentences, the same for a given seed."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(num_sentences):
        words = [_word(rng) for _ in range(rng.randint(1, 18))]
        parts = []
        for word in words:
            parts.append(word)
            parts.append(rng.choice(_SPACES) if rng.random() < 0.9 else "")
        sentences.append("".join(parts))
    return sentences
