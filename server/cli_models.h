/* cli_models.h - `transformerd models ...` (cli_models.c). */
#ifndef SRV_CLI_MODELS_H
#define SRV_CLI_MODELS_H

/* argv without "models"; returns the exit status. */
int cli_models(int argc, char **argv);

#endif /* SRV_CLI_MODELS_H */
