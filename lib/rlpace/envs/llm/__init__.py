"""A language-model text environment: prompts on reset, generated text or tokens as actions."""
